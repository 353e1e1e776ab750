"""The one reader of small text inputs: specs, configs, plans, profiles, token and step files,
JSON documents.

Every such file is checked the same way before it is parsed, so that hostile or broken input
is one line naming the file, never an internal error or a hang: it must be a regular file (a
FIFO or a device would block the read), at most ``max_bytes`` long, text (UTF-8, with or
without a byte-order mark; UTF-16 with its mark is read too), with no line longer than
:data:`MAX_LINE_BYTES`; JSON and TOML nested deeper than :data:`MAX_DEPTH` are refused.
"""

from __future__ import annotations

import json
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from powerkit.core.errors import BadInputError
from powerkit.core.shown import visible

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "bundled_or_given",
    "check_regular",
    "check_utf8_name",
    "load_json",
    "load_toml",
    "read_text_input",
]

#: the longest line (or field) a text input may hold
MAX_LINE_BYTES = 128 * 1024
#: the deepest nesting of a JSON or TOML input
MAX_DEPTH = 64
_DEFAULT_MAX = 64 * 1024 * 1024


def check_utf8_name(path: Path | str, what: str = "", *, output: bool = False) -> None:
    """Refuse a path whose name is not UTF-8 (bytes the file system allows, Python keeps as
    surrogates, and the Parquet, CSV and database libraries cannot take): one line showing the
    name's bytes and, for an input, a link that reads it under a UTF-8 name."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = visible(text)  # (each byte that is not UTF-8 as \\xNN, as bash's $'…' reads it)
        label = f"{what} {shown}" if what else shown
        if output:
            fix = "give a name in UTF-8"
        else:
            quoted = shown.replace("'", "\\'")
            suffix = "".join(c for c in Path(text).suffix if c.isascii())
            fix = f"rename it, or link it under a UTF-8 name (ln -s $'{quoted}' renamed{suffix})"
        raise BadInputError(
            f"{label}: the name is not UTF-8, which powerkit's readers and writers need; {fix}"
        ) from None


def check_regular(path: Path, what: str = "") -> None:
    """Refuse a path that does not exist or is not a regular file (a FIFO, a socket, a device
    or a folder), without opening it: opening a FIFO blocks until a writer comes."""
    label = f"{what} {path}" if what else str(path)
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        raise BadInputError(f"{label}: no such file") from None
    except OSError as exc:
        raise BadInputError(f"{label}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise BadInputError(f"{label}: is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise BadInputError(f"{label}: not a regular file (a pipe or a device); give a file")


def bundled_or_given(given: Path | str, folder: Path, what: str = "") -> Path:
    """The file ``given`` names: a path, or the name of a TOML file that ships in ``folder``
    (a path that exists wins); one line listing the bundled names when it is neither."""
    names = sorted(p.stem for p in folder.glob("*.toml"))
    if not Path(given).exists() and str(given) in names:
        return folder / f"{given}.toml"
    if not Path(given).exists():
        label = f"{what} {given}" if what else str(given)
        raise BadInputError(f"{label}: no such file (bundled examples: {', '.join(names)})")
    return Path(given)


def read_text_input(
    path: Path, what: str = "", max_bytes: int = _DEFAULT_MAX, *, line_limit: bool = True
) -> str:
    """Return the text of a small input file, checked as the module docstring says
    (``line_limit``: lines of at most :data:`MAX_LINE_BYTES`; a JSON document, whose size
    and depth bound it, may be written on one line)."""
    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    check_regular(path, what)
    size = path.stat().st_size
    if size > max_bytes:
        raise BadInputError(f"{label}: {size:,} bytes, more than the {max_bytes:,} it may hold")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"{label}: cannot be read ({exc.strerror})") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = raw.decode("utf-16")
        except UnicodeDecodeError:
            raise BadInputError(f"{label}: not text (a broken UTF-16 file)") from None
    else:
        if b"\x00" in raw:
            raise BadInputError(f"{label}: a binary file, not text")
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadInputError(
                f"{label}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
            ) from None
    longest = max((len(line) for line in text.splitlines()), default=0) if line_limit else 0
    if longest > MAX_LINE_BYTES:
        line = next(n for n, ln in enumerate(text.splitlines(), 1) if len(ln) > MAX_LINE_BYTES)
        raise BadInputError(f"{label}: line {line} is over {MAX_LINE_BYTES // 1024} KB long")
    return text


def _depth(value: Any, limit: int) -> int:
    """The nesting depth of a parsed document, stopping past ``limit``."""
    depth, level = 0, [value]
    while level and depth <= limit:
        nxt: list[Any] = []
        for v in level:
            if isinstance(v, dict):
                nxt.extend(v.values())
            elif isinstance(v, list):
                nxt.extend(v)
        level, depth = nxt, depth + 1
    return depth


def _parsed(
    path: Path,
    what: str,
    max_bytes: int,
    kind: str,
    parse: Callable[[str], Any],
    errors: tuple[type[Exception], ...],
    hint: str = "",
) -> Any:
    text = read_text_input(path, what, max_bytes, line_limit=kind != "JSON")
    label = f"{what} {path}" if what else str(path)
    try:
        data = parse(text)
    except RecursionError:
        raise BadInputError(f"{label}: nested more than {MAX_DEPTH} levels deep") from None
    except errors as exc:
        more = f"; {hint}" if hint else ""
        raise BadInputError(f"{label}: not {kind} ({exc}){more}") from None
    if _depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise BadInputError(f"{label}: nested more than {MAX_DEPTH} levels deep")
    return data


def load_json(path: Path, what: str = "", max_bytes: int = _DEFAULT_MAX, hint: str = "") -> Any:
    """Return a JSON input, parsed; one line for anything wrong with it (``hint``: how to
    write a file that is not JSON)."""
    return _parsed(path, what, max_bytes, "JSON", json.loads, (ValueError,), hint)


def load_toml(path: Path, what: str = "", max_bytes: int = 16 * 1024 * 1024) -> dict[str, Any]:
    """Return a TOML input, parsed; one line for anything wrong with it."""
    data: dict[str, Any] = _parsed(
        path, what, max_bytes, "TOML", tomllib.loads, (tomllib.TOMLDecodeError,)
    )
    return data
