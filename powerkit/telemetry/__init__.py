"""Telemetry behind one seam per vendor (NVML, amd-smi) and the simulator, and the recorder
loop that writes canonical traces."""
