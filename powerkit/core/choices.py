"""The choices of every option that takes one word: one StrEnum per kind of option, shared by
the commands that take it (a command that takes only some of the choices says which with
:func:`only`)."""

from __future__ import annotations

from enum import StrEnum

from powerkit.core.errors import BadInputError

__all__ = [
    "Backend",
    "Compose",
    "ControlBackend",
    "ControlKnob",
    "CvKind",
    "Env",
    "GpuBackend",
    "JobBackend",
    "LoopBackend",
    "Method",
    "Mode",
    "PfiBackend",
    "Schedule",
    "Scope",
    "only",
]


class Backend(StrEnum):
    """Where a job runs, or readings come from: the simulator, real GPUs through NVML (NVIDIA)
    or amd-smi (AMD), a command run per sweep point, or a running workload's knob channel."""

    sim = "sim"
    nvml = "nvml"
    amdsmi = "amdsmi"
    cmd = "cmd"
    live = "live"


class GpuBackend(StrEnum):
    """The backends of a command that reads GPUs (``record``, ``top``, ``bloat profile``); none
    given, the GPUs the machine has."""

    nvml = "nvml"
    amdsmi = "amdsmi"
    sim = "sim"


class ControlBackend(StrEnum):
    """The backends of ``control run``: the GPUs found with the job's knob channel, or sim."""

    nvml = "nvml"
    sim = "sim"


class JobBackend(StrEnum):
    """The backends of a command that runs a job per point (``sweep``): the simulator, a
    command, or a running workload's knob channel."""

    sim = "sim"
    cmd = "cmd"
    live = "live"


class PfiBackend(StrEnum):
    """The backends of ``pfi sweep``: the simulator, a job on real GPUs, or a command."""

    sim = "sim"
    nvml = "nvml"
    amdsmi = "amdsmi"
    cmd = "cmd"


class LoopBackend(StrEnum):
    """The backends of ``bloat run``: the simulated pipeline, or a training loop's knobs."""

    sim = "sim"
    live = "live"


class Env(StrEnum):
    """What a controller trains on: the simulated job, or a recorded trace replayed through a
    sweep of the knob's response."""

    sim = "sim"
    trace = "trace"


class ControlKnob(StrEnum):
    """The knob a controller turns (joint: group size and concurrency, and a power cap as a
    last resort)."""

    group_size = "group_size"
    concurrency = "concurrency"
    joint = "joint"


class Compose(StrEnum):
    """How the members of a fleet (or the replicas of one) line up in time."""

    aligned = "aligned"
    random = "random"
    staggered = "staggered"


class Mode(StrEnum):
    """How windows are placed."""

    rolling = "rolling"
    tumbling = "tumbling"


class Scope(StrEnum):
    """What each window judges."""

    gpu = "gpu"
    sum = "sum"


class TopScope(StrEnum):
    """What each row of the live view sums (``top --scope``; keys g/h/f)."""

    gpu = "gpu"
    host = "host"
    fleet = "fleet"


class Schedule(StrEnum):
    """The pipeline schedule."""

    one_f_one_b = "1f1b"
    gpipe = "gpipe"


class Method(StrEnum):
    """How each deadline is solved."""

    auto = "auto"
    exact = "exact"
    relaxed = "relaxed"


class CvKind(StrEnum):
    """Cross-validation scheme."""

    loo = "loo"
    loco = "loco"


def only(value: StrEnum, allowed: tuple[StrEnum, ...], option: str, command: str) -> None:
    """Refuse ``value`` where ``command`` takes only ``allowed`` of its option's choices."""
    if value not in allowed:
        raise BadInputError(
            f"{command} {option} {value.value}: one of {', '.join(a.value for a in allowed)}"
        )
