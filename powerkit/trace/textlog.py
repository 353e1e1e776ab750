"""What the text readers share: reading a log's lines, and one policy for malformed rows."""

from __future__ import annotations

from pathlib import Path

from powerkit.errors import BadInputError

__all__ = ["nonblank_lines", "resolve_bad_rows"]


def nonblank_lines(path: Path) -> tuple[list[tuple[int, str]], int]:
    """Return ((line number, stripped text) of every non-blank line, number of lines)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    return [(n, s) for n, s in enumerate((ln.strip() for ln in lines), start=1) if s], len(lines)


def resolve_bad_rows(
    path: Path,
    bad: list[tuple[int, str]],
    *,
    last_line: int,
    skip: bool,
    warnings: list[str],
) -> None:
    """Decide what malformed rows mean; ``bad`` holds (line number, problem), in file order.

    A single bad row on the file's last line is a logger killed mid-write: dropped with a
    warning. Otherwise the first bad row is an error naming its line, unless ``skip``
    (``--skip-bad-rows``), which drops them all with a warning that counts them.
    """
    if not bad:
        return
    first_line, problem = bad[0]
    if len(bad) == 1 and first_line == last_line:
        warnings.append(f"{path}: line {first_line}: truncated final line dropped")
    elif skip:
        warnings.append(f"{path}: skipped {len(bad)} bad row(s), first at line {first_line}")
    else:
        raise BadInputError(
            f"{path}: line {first_line}: {problem} (use --skip-bad-rows to drop such rows)"
        )
