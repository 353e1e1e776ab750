"""Power sensors: what a log's ``power_w`` is of the power the GPU drew (a point, an average,
a part-time sample), how a simulated run is seen through one (``sense``), and how far a
figure computed from such a log can be from the truth (``bounds``)."""

from powerkit.sensors.models import COUNTER, SENSORS, EnergyCounter, Sensor, get_sensor, sensor_of

__all__ = ["COUNTER", "SENSORS", "EnergyCounter", "Sensor", "get_sensor", "sensor_of"]
