"""Every change of GPU or workload state, and putting it back: power caps and locked clocks
(``caps``), power smoothing (``smoothing``), the workload's knob channel (``knobs``), the
journal each original goes into before it is changed (``journal``) and ``powerkit restore``
(``restore``). Nothing outside this package writes to a GPU; the vendors' setters live behind
the telemetry seam (``powerkit.telemetry.gpu.GpuControl``)."""
