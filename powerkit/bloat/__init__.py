"""Energy bloat of pipeline-parallel training: stage profiles, the schedule, the planner
(time-energy frontier), the simulated pipeline and live measurement (docs/bloat.md)."""
