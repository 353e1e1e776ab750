"""Where a recording's readings come from, built from what ``record`` is given."""

from __future__ import annotations

from powerkit.core.choices import Backend
from powerkit.core.errors import BadInputError, option
from powerkit.core.units import parse_power
from powerkit.sim import Knobs, get_preset
from powerkit.telemetry.base import TelemetrySource

__all__ = ["make_source"]


def make_source(
    backend: Backend | None,
    *,
    preset: str,
    seed: int,
    group_size: int | None,
    concurrency: int | None,
    power_cap: str | None,
    realtime: bool,
    gpus: list[int] | None,
    host: str | None,
    drift: str = "none",
    sensor: str | None = None,
    truth: bool = False,
) -> TelemetrySource:
    """The readings ``record`` takes: real GPUs through NVML or amd-smi (``gpus``: indices,
    None: all; ``backend`` None: the GPUs this machine has, NVIDIA's else AMD's, refused
    naming ``--backend sim`` where it has none), or the simulated job of ``preset`` at the
    given knobs (``power_cap``: a power or a share of the preset's nameplate) and
    response-length ``drift`` (``none``: stationary), read through ``sensor`` (None: the
    simulated power itself; the sensor's update clock starts at an offset drawn from
    ``seed``; ``truth``: the simulated power alone, for ``--truth-out``)."""
    if backend in (Backend.nvml, Backend.amdsmi, None):
        from powerkit.telemetry.gpu import AMD, NVIDIA
        from powerkit.telemetry.vendors import open_gpu_source

        if drift != "none":
            raise BadInputError(
                f"{option('drift')} applies to {option('backend')} sim (real jobs drift on "
                "their own)"
            )
        vendor = {Backend.nvml: NVIDIA, Backend.amdsmi: AMD, None: None}[backend]
        source: TelemetrySource = open_gpu_source(gpus, vendor)
        if host:
            source.host = host
        return source
    from powerkit.sim.settings import DRIFTS
    from powerkit.telemetry.sim import SimSource

    if drift not in DRIFTS:
        raise BadInputError(f"{option('drift')} {drift!r}: one of {', '.join(DRIFTS)}")

    p = get_preset(preset)
    cap = None
    if power_cap is not None:
        cap = parse_power(power_cap).resolve(p.tdp_w)
    knobs = Knobs(group_size or p.group_size, concurrency or p.concurrency, cap)
    model, phase = None, 0.0
    if sensor is not None:
        import numpy as np

        from powerkit.sensors import get_sensor

        model = get_sensor(sensor)
        phase = float(np.random.default_rng([seed, 7]).uniform(0, model.period_s or 1.0))
    sim = SimSource(
        p,
        knobs=knobs,
        seed=seed,
        host=host or "sim",
        realtime=realtime,
        drift=DRIFTS[drift],
        sensor=model,
        phase_s=round(phase, 6),
        truth=truth,
    )
    if gpus is not None:
        raise BadInputError(
            f"{option('gpus')} applies to real GPUs ({option('backend')} nvml, amdsmi); a "
            "preset fixes its GPU count"
        )
    return sim
