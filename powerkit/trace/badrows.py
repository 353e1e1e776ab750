"""One policy for malformed rows, shared by every text reader."""

from __future__ import annotations

from pathlib import Path

from powerkit.errors import BadInputError

__all__ = ["resolve_bad_rows"]


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
