"""Actuator-authority sweeps: run a workload at each knob setting and measure its power."""
