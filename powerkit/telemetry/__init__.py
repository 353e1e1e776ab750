"""Telemetry sources (NVML, simulator) and the recorder loop that writes canonical traces."""
