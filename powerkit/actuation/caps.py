"""GPU power caps and locked SM clocks for the sweep's cap and frequency axes: set per point,
always restored, and journaled.

The original limits go into the cap journal (powerkit/actuation/journal.py) before the first
change, so that even a SIGKILL leaves a record ``powerkit restore`` can act on; the same
journal is the lock that keeps a second run off GPUs this one set (see journal.claim). A GPU
whose limit a killed run left behind is taken over: its journaled original is the one restored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import TracebackType

from powerkit.actuation import journal
from powerkit.core.errors import BadInputError, NotPermittedError, option
from powerkit.telemetry.gpu import GpuControl

__all__ = ["LockedClocks", "PowerCaps"]


def _undo_all(undo: Sequence[Callable[[], None]], exc: BaseException | None) -> bool:
    """Run every undo step (each GPU gets its setting back even if another one fails); return
    True when all succeeded. A failure is raised when nothing else is on its way out."""
    failed: list[Exception] = []
    for step in undo:
        try:
            step()
        except Exception as error:
            failed.append(error)
    if failed and exc is None:
        raise failed[0]
    return not failed


def _vendor(gpus: Sequence[GpuControl]) -> str:
    """The one vendor of a run's GPUs (what ``restore`` opens to put them back)."""
    vendors = {gpu.vendor for gpu in gpus}
    if len(vendors) > 1:
        raise BadInputError(f"one run sets GPUs of one vendor, not {', '.join(sorted(vendors))}")
    return vendors.pop() if vendors else "nvidia"


class PowerCaps:
    """Context manager over GPUs (either vendor's): ``set(watts)`` per point; the original
    limits come back on exit, whether the sweep ended, failed or was interrupted."""

    def __init__(self, gpus: Sequence[GpuControl]) -> None:
        self.gpus = gpus
        self.original: list[float | None] = []
        #: journal entries of killed runs whose limits this run took over (and restores)
        self.adopted: list[journal.CapEntry] = []
        self.changed: set[int] = set()

    def __enter__(self) -> PowerCaps:
        # the GPUs are claimed, and their originals written down, before any change
        by_index = {gpu.index: gpu for gpu in self.gpus}
        self.original, self.adopted = journal.claim(
            [(gpu.index, gpu.uuid()) for gpu in self.gpus],
            lambda index: by_index[index].power_limit_w(),
            vendor=_vendor(self.gpus),
        )
        # what to put back on exit: the GPUs a set reached, and those a killed run left changed
        self.changed = {entry.gpu for entry in self.adopted}
        return self

    def set(self, watts: float | None) -> None:
        """Set every GPU's limit to ``watts`` (None: back to the original limit)."""
        for gpu, original in zip(self.gpus, self.original, strict=True):
            target = original if watts is None else watts
            if target is None:
                continue
            lo, hi = gpu.power_limit_range_w()
            if not lo <= target <= hi:
                raise BadInputError(
                    f"power cap {target:g} W is outside GPU {gpu.index}'s range {lo:g}-{hi:g} W"
                )
            try:
                gpu.set_power_limit_w(target)
                self.changed.add(gpu.index)
            except NotPermittedError:
                raise NotPermittedError(
                    "setting GPU power limits is not permitted: run as root (or with "
                    "CAP_SYS_ADMIN), or drop the power-cap axis"
                ) from None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        undo = [
            functools.partial(gpu.set_power_limit_w, original)
            for gpu, original in zip(self.gpus, self.original, strict=True)
            if original is not None and gpu.index in self.changed
        ]
        if not _undo_all(undo, exc):
            return  # the journal keeps what could not be restored
        journal.remove_entries(kind=journal.LIMIT)


class LockedClocks:
    """Context manager over GPUs (either vendor's): ``set(mhz)`` locks every GPU's SM clock to
    ``mhz`` per point (None: unlocked); on exit the locks are reset to the driver's default,
    whether the sweep ended, failed or was interrupted. Journaled before the first lock, so that
    ``powerkit restore`` resets what a killed run left locked."""

    def __init__(self, gpus: Sequence[GpuControl]) -> None:
        self.gpus = gpus
        self.ranges: list[tuple[float, float]] = []

    def __enter__(self) -> LockedClocks:
        self.ranges = [gpu.sm_clock_range_mhz() for gpu in self.gpus]
        journal.claim(
            [(gpu.index, gpu.uuid()) for gpu in self.gpus],
            lambda index: 0.0,
            journal.CLOCKS,
            vendor=_vendor(self.gpus),
        )
        return self

    def set(self, mhz: float | None) -> None:
        """Lock every GPU's SM clock at ``mhz`` (None: reset to the default behaviour)."""
        for gpu, (lo, hi) in zip(self.gpus, self.ranges, strict=True):
            if mhz is not None and not lo <= mhz <= hi:
                raise BadInputError(
                    f"GPU frequency {mhz:g} MHz is outside GPU {gpu.index}'s supported SM clocks "
                    f"{lo:g}-{hi:g} MHz"
                )
            try:
                if mhz is None:
                    gpu.reset_locked_clocks()
                else:
                    gpu.lock_sm_clock_mhz(mhz)
            except NotPermittedError:
                raise NotPermittedError(
                    "locking GPU clocks is not permitted: run as root (or with CAP_SYS_ADMIN), "
                    f"or drop the {option('gpu-frequency')} axis"
                ) from None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not _undo_all([gpu.reset_locked_clocks for gpu in self.gpus], exc):
            return  # the journal keeps what could not be reset
        journal.remove_entries(kind=journal.CLOCKS)
