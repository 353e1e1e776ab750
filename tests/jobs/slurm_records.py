"""sacct -P and scontrol show job -d output as Slurm 23.11 prints them, for a cluster whose
clock is Europe/Paris (UTC+1 in January)."""

SACCT = """JobID|User|Account|Partition|NodeList|AllocTRES|Start|End|State
1001|carol|ml|gpu|n2|billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1|2026-01-05T09:00:00|2026-01-05T09:10:00|COMPLETED
1001.batch|||||cpu=8,gres/gpu=2,mem=64G,node=1|2026-01-05T09:00:00|2026-01-05T09:10:00|COMPLETED
1001.extern|||||billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|2026-01-05T09:00:00|2026-01-05T09:10:00|COMPLETED
1002_3|dave|cv|gpu|n2|billing=4,cpu=4,gres/gpu=1,mem=16G,node=1|2026-01-05T09:05:00|Unknown|RUNNING
1003|erin|ml|gpu|None assigned|billing=8,cpu=8,gres/gpu=8,node=1|Unknown|Unknown|PENDING
1004|frank|cpu|cpu|n1|billing=4,cpu=4,mem=8G,node=1|2026-01-05T09:00:00|2026-01-05T09:01:00|COMPLETED
"""

SCONTROL = """JobId=1005 ArrayJobId=1002 ArrayTaskId=3 JobName=eval
   UserId=dave(1002) GroupId=cv(1002) MCS_label=N/A
   JobState=RUNNING Reason=None Dependency=(null)
   NodeList=n2
   BatchHost=n2
   NumNodes=1 NumCPUs=4 NumTasks=1 CPUs/Task=4 ReqB:S:C:T=0:0:*:*
   TRES=cpu=4,mem=16G,node=1,billing=4,gres/gpu=1
     Nodes=n2 CPU_IDs=8-11 Mem=16384 GRES=gpu:a100:1(IDX:3)
   TresPerNode=gres:gpu:1
"""
