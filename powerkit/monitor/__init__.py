"""Measuring a job from inside its own process (``powerkit.Monitor``): the session in
``session``; docs/monitor.md."""

from powerkit.monitor.session import Measurement, Monitor, MonitorError

__all__ = ["Measurement", "Monitor", "MonitorError"]
