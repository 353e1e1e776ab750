"""One writer for every output file (traces, CSV, JSON, HTML, Markdown, policies, knob files).

Every file powerkit writes goes through :func:`atomic_path` or :func:`atomic_write`: the data
goes to a new file with an unpredictable name in the target's folder (``mkstemp``: created
exclusively, so a link planted there cannot redirect it), is flushed to disk (fsync), and is
renamed over the target in one step, so a reader sees the old file or the new one, never half
of one, and a crash leaves at most a temp file that every reader skips and the next write of
the same target removes. :func:`check_output` holds the rules a command applies before any
work: no overwrite without ``--force``, never over one of the command's own inputs, never
through a symbolic link, never onto a folder, a device, a pipe or a socket.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import check_utf8_name

__all__ = [
    "TEMP_MARK",
    "atomic_path",
    "atomic_write",
    "check_dataset_output",
    "check_output",
    "check_plotly_js",
    "csv_safe",
    "csv_unsafe",
    "is_temp",
    "out_of_space",
    "probe_writable",
    "unfinished_path",
    "write_bytes",
    "write_text",
]

#: Temp files end with this; readers skip them, and the next write of a target removes its own.
TEMP_MARK = ".powerkit-tmp"


def is_temp(path: Path) -> bool:
    """Return True for a temp file of an unfinished write (ours, or an older ``.tmp``)."""
    name = path.name
    return name.endswith(TEMP_MARK) or (name.startswith(".") and name.endswith(".tmp"))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def check_output(
    path: Path, *, force: bool, inputs: Iterable[Path] = (), what: str = "--out"
) -> Path:
    """Return ``path`` when a command may write it; one-line BadInputError otherwise.

    Refused, with or without ``--force``: a target that is one of ``inputs`` (after resolving
    links), a symbolic link, a folder, a device, pipe or socket, a parent that is not a
    folder. Refused without
    ``--force``: a target that exists.
    """
    path = Path(path)
    check_utf8_name(path, what, output=True)
    for source in inputs:
        if _same_file(path, Path(source)):
            raise BadInputError(f"{what} {path}: is one of the command's inputs; write elsewhere")
    if path.is_symlink():
        raise BadInputError(f"{what} {path}: is a symbolic link; give the file it should be")
    if path.is_dir():
        raise BadInputError(f"{what} {path}: is a folder; give a file name")
    if not _regular_or_absent(path):
        raise BadInputError(
            f"{what} {path}: is not a regular file (a device, pipe or socket); an output "
            "must be a regular file or a new name"
        )
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BadInputError(f"{what} {path}: {parent} is a file, not a folder")
            break
    if path.exists() and not force:
        raise BadInputError(f"{what} {path}: already exists (use {option('force')} to overwrite)")
    probe_writable(path, what)
    return path


#: what a spreadsheet reads as the start of a formula in a text cell
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(text: str) -> str:
    """A text cell for a CSV a spreadsheet may open: one that would start a formula (``=``,
    ``+``, ``-``, ``@``, a tab or carriage return) is prefixed with ``'``, which spreadsheets
    show as text and :func:`csv_unsafe` removes when powerkit reads the file back."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_unsafe(text: str) -> str:
    """The text :func:`csv_safe` protected."""
    return text[1:] if text.startswith("'") and text[1:].startswith(_FORMULA_START) else text


def unfinished_path(out: Path) -> Path:
    """Where long work bound for ``out`` (a sweep, a training run) keeps its checkpoints until
    it finishes: ``NAME.unfinished.EXT`` beside it. ``out`` is written only when the work is
    done, so an earlier result there is never replaced by part of a new one."""
    out = Path(out)
    return out.with_name(f"{out.stem}.unfinished{out.suffix}")


def probe_writable(path: Path, what: str = "--out") -> None:
    """Refuse, before any work, a target whose folder cannot take a new file (``/proc``, a
    read-only mount, no permission): a file is created and removed there, as the write will."""
    here = Path(path).parent
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        if here == Path(path).parent:
            fd, name = tempfile.mkstemp(prefix=".powerkit-probe.", suffix=TEMP_MARK, dir=here)
            os.close(fd)
            os.unlink(name)
        else:  # the folders will be made: the nearest one that exists must take one
            os.rmdir(tempfile.mkdtemp(prefix=".powerkit-probe.", dir=here))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise BadInputError(f"{what} {path}: cannot write there ({reason})") from None


def check_dataset_output(
    path: Path, *, force: bool, inputs: Iterable[Path] = (), what: str = "--out"
) -> Path:
    """Return ``path`` when a command may write a dataset folder there: not a file or a link,
    not holding one of ``inputs``, and holding no Parquet files unless ``force`` (then the
    files of the dataset there are replaced in one step once the new ones are written; a file
    no powerkit write created is never removed: see powerkit.trace.dataset)."""
    path = Path(path)
    check_utf8_name(path, what, output=True)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise BadInputError(f"{what} {path}/: is not a folder; give a folder for a dataset")
    for source in inputs:
        src = Path(source)
        if src.exists() and path.exists() and src.resolve().is_relative_to(path.resolve()):
            raise BadInputError(f"{what} {path}/: holds the input {src}; write elsewhere")
    if path.exists() and any(path.rglob("*.parquet")) and not force:
        raise BadInputError(
            f"{what} {path}/: already holds a dataset (use {option('force')} to replace it)"
        )
    probe_writable(path / "x", what)
    return path


_BUNDLE_HEAD = b"/**\n* plotly.js v"


def check_plotly_js(
    plotly_js: str, *, force: bool, out: Path | None, inputs: list[Path] | tuple[Path, ...] = ()
) -> None:
    """Refuse a ``--plotly-js FILE`` that the page's write would damage, before any work.

    The file is shared by pages, so one that already holds Plotly's JavaScript (any version)
    is rewritten freely; any other existing file only with ``--force``; never the page itself,
    one of the command's inputs, a link or a folder, with or without ``--force``.
    """
    if plotly_js in ("inline", "cdn"):
        return
    script = Path(plotly_js)
    if not plotly_js.strip():
        raise BadInputError(f"{option('plotly-js')} '': give inline, cdn or a file path")
    sources = [*inputs, *([out] if out is not None else [])]
    check_output(script, force=True, inputs=sources, what=option("plotly-js"))
    if script.exists() and not force:
        try:
            with open(script, "rb") as fh:
                head = fh.read(len(_BUNDLE_HEAD))
        except OSError as exc:
            raise BadInputError(
                f"{option('plotly-js')} {script}: cannot be read ({exc.strerror})"
            ) from None
        if head != _BUNDLE_HEAD:
            raise BadInputError(
                f"{option('plotly-js')} {script}: already exists and is not Plotly's JavaScript "
                f"(use {option('force')} to overwrite it)"
            )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_stale(path: Path) -> None:
    """Remove temp files a killed earlier write of ``path`` left beside it."""
    for old in path.parent.glob(f".{path.name}.*"):
        if is_temp(old) and old.is_file() and not old.is_symlink():
            with contextlib.suppress(OSError):
                old.unlink()


@contextlib.contextmanager
def atomic_path(path: Path, *, sync: bool = True) -> Iterator[Path]:
    """Yield a temp path beside ``path`` to write to; on success it replaces ``path``.

    For writers that take a file name (Parquet, Polars). On an exception the temp file is
    removed and ``path`` is left as it was. ``sync=False`` skips the fsync (a recording's part
    files: written from the sampling loop, where a slow disk must not delay the next sample;
    the rename still makes each part whole, and the final file is synced).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_MARK, dir=path.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; an output is an ordinary file
        os.close(fd)
        yield tmp
        if sync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        _replace(tmp, path, sync=sync)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if out_of_space(exc):
            raise BadInputError(
                f"{path}: no space left on the device (or over the file size limit) while it "
                "was written; nothing was replaced"
            ) from None
        raise


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def out_of_space(exc: BaseException) -> bool:
    """True for a write that failed because the disk (or a quota, or a size limit) is full;
    also when a library (DuckDB, Arrow) only says so in its message."""
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return True
    text = str(exc)
    return any(os.strerror(code) in text for code in _FULL)


@contextlib.contextmanager
def atomic_write(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Yield an open temp file beside ``path`` (text ``"w"`` or binary ``"wb"``); on success it
    is flushed, synced and renamed over ``path``."""
    with atomic_path(path) as tmp:
        encoding = None if "b" in mode else "utf-8"
        with open(tmp, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()


def _regular_or_absent(path: Path) -> bool:
    """True for a path that names nothing, or a regular file (not followed if a link)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):  # (a parent that is a file: said apart)
        return True
    except OSError:
        return False


def _replace(tmp: Path, path: Path, *, sync: bool = True) -> None:
    if path.is_symlink():  # planted between the check and now: never write through it
        raise BadInputError(f"{path}: became a symbolic link while it was written; not replaced")
    if not _regular_or_absent(path):  # a device, pipe or socket: never renamed over
        raise BadInputError(
            f"{path}: is not a regular file (a device, pipe or socket); not replaced"
        )
    os.replace(tmp, path)
    if not sync:
        return
    with contextlib.suppress(OSError):  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path."""
    with atomic_write(path, "w") as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with atomic_write(path, "wb") as fh:
        fh.write(data)
    return Path(path)
