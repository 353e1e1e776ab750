"""Put back the power limits (and unlock the clocks) a killed run left behind, from the cap
journal (`restore`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from powerkit.actuation import journal
from powerkit.core.documents import Document
from powerkit.core.errors import BadInputError
from powerkit.core.jsonable import OMIT_NONE
from powerkit.telemetry.gpu import GpuControl
from powerkit.telemetry.vendors import open_gpu

__all__ = ["JournalEntry", "RestoreOptions", "RestoreResult", "run_restore"]


@dataclass(frozen=True)
class JournalEntry(journal.CapEntry):
    """A journal entry as ``restore`` reports it: what a process changed (the entry's
    fields), and what restore found there (``found_w``: the limit, or what was changed) or
    why it kept the entry (``why``)."""

    found_w: float | str | None = field(default=None, metadata=OMIT_NONE)
    why: str | None = field(default=None, metadata=OMIT_NONE)

    @classmethod
    def of(cls, entry: journal.CapEntry, **more: Any) -> JournalEntry:
        """``entry`` with what restore says of it."""
        return cls(**{f.name: getattr(entry, f.name) for f in fields(entry)}, **more)


@dataclass(frozen=True)
class RestoreResult(Document):
    """What ``powerkit restore`` did (or would do, with ``dry_run``)."""

    COMMAND: ClassVar[str] = "restore"

    journal: str
    dry_run: bool
    restored: list[JournalEntry] = field(default_factory=list)
    kept: list[JournalEntry] = field(default_factory=list)
    #: entries that are not valid (a field missing, of the wrong type, an unknown kind): never
    #: applied, left in the journal, each named here
    invalid: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RestoreOptions:
    """What ``powerkit restore`` is given.

    Attributes:
        include_alive: also restore the entries whose run still seems alive (a reused pid).
        dry_run: say what would be restored; change nothing.
    """

    include_alive: bool = False
    dry_run: bool = False


def run_restore(opts: RestoreOptions = RestoreOptions()) -> RestoreResult:
    """Restore every journaled setting whose process is gone (all with ``include_alive``).

    An entry whose GPU now has another UUID (a reordered or replaced device), or whose limit
    lies outside the GPU's own range, is kept, not applied; an entry that is not valid (a
    field of the wrong type, an unknown kind) is named in ``invalid`` and left alone. Restored
    entries leave the journal.
    """
    include_alive, dry_run = opts.include_alive, opts.dry_run
    entries, invalid = journal.read_checked()
    result = RestoreResult(str(journal.journal_path()), dry_run, invalid=invalid)
    if not entries:
        return result
    for entry in entries:
        if journal.alive(entry.pid, entry.started) and not include_alive:
            result.kept.append(JournalEntry.of(entry, why=f"pid {entry.pid} still runs"))
            continue
        with open_gpu(entry.vendor, entry.gpu) as gpu:
            uuid = gpu.uuid()
            if entry.uuid is not None and uuid != entry.uuid:
                why = f"GPU {entry.gpu} is now {uuid}, not {entry.uuid}"
                result.kept.append(JournalEntry.of(entry, why=why))
                continue
            if entry.kind == journal.CLOCKS:
                found: float | str | None = "locked clocks"
                if not dry_run:
                    gpu.reset_locked_clocks()
            elif entry.kind == journal.SMOOTHING:
                found = "changed power smoothing"
                if not dry_run:
                    _put_back_smoothing(gpu, entry)
            else:
                low, high = gpu.power_limit_range_w()
                if not low <= entry.original_w <= high:
                    why = (
                        f"{entry.original_w:g} W is outside GPU {entry.gpu}'s power-limit range "
                        f"({low:g}-{high:g} W)"
                    )
                    result.kept.append(JournalEntry.of(entry, why=why))
                    continue
                found = gpu.power_limit_w()
                if not dry_run:
                    gpu.set_power_limit_w(entry.original_w)
            if not dry_run:
                journal.remove_entries([entry.gpu], pid=entry.pid, kind=entry.kind)
            result.restored.append(JournalEntry.of(entry, found_w=found))
    return result


def _put_back_smoothing(gpu: GpuControl, entry: journal.CapEntry) -> None:
    from powerkit.telemetry.nvml import NvmlGpu, Smoothing

    if not isinstance(gpu, NvmlGpu) or entry.settings is None:
        raise BadInputError(
            f"cap journal: GPU {entry.gpu}'s power-smoothing entry has no "
            "NVIDIA setting to put back"
        )
    gpu.set_smoothing(Smoothing.from_settings(entry.settings))
