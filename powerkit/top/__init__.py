"""``powerkit top``: the live view of GPU power against a budget (docs/top.md).

:mod:`powerkit.top.stream` holds the window arithmetic, fed sample by sample: the cells, means,
completeness and violations ``powerkit windows`` computes on the recorded trace, kept as the
samples come; :mod:`powerkit.top.session` keeps the state and hands out consistent snapshots;
:mod:`powerkit.top.sources` opens what it samples: the GPUs (through the recorder, the same
sources ``record`` reads) or a Prometheus server.
"""
