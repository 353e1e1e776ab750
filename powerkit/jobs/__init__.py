"""Whose energy it was: per-job, per-user and per-account energy, cost and carbon of a fleet
trace, from Slurm's records, a plain allocations CSV, or the trace's own pod labels
(``powerkit jobs``; docs/jobs.md)."""
