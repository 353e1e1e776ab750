"""A dataset folder: which files it holds, and writing one as a transaction.

A dataset is a folder of canonical Parquet files, hive-partitioned by ``host=H/date=D`` when
powerkit writes it. Its manifest, ``_powerkit_dataset.json``, lists the files that make up the
dataset; readers trust it, so a write is made visible in one step (an atomic replace of the
manifest) and a write killed at any point leaves the old dataset or the new one, never both:

1. the manifest is rewritten naming the files the write is about to create as ``pending``;
2. the new files are written (each atomically, with a name no earlier write used);
3. the manifest is replaced by one listing only the new files (the commit), the files it
   replaces named as ``removing``;
4. the replaced files are removed.

The next write removes whatever an earlier one left ``pending`` or ``removing``. Only files a
powerkit write created are ever removed: a Parquet file placed in the folder by hand is left
where it is (and, in a folder with a manifest, not read, with a warning that says so).

A folder without a manifest (made by hand, or by an older powerkit) is read as every
``*.parquet`` file under it, except names beginning with ``.`` or ``_`` (temp files, staging
folders) at any level. Symbolic links to folders are never followed, and a linked file is
read only when it points inside the folder. Partition keys come only from the folder's own
``host=``/``date=`` levels: a ``name=value`` folder above the dataset, or a key other than
host and date, never overrides a column.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from powerkit.core.db import connect
from powerkit.core.errors import BadInputError
from powerkit.core.inputs import check_utf8_name
from powerkit.core.outputs import write_text
from powerkit.trace.writing import sql_text, write_sorted

if TYPE_CHECKING:
    from powerkit.trace.model import Trace
    from powerkit.trace.schema import TraceMeta

__all__ = ["MANIFEST", "PARTITION_KEYS", "dataset_files", "partition_of", "write_dataset"]

MANIFEST = "_powerkit_dataset.json"
#: the only hive keys powerkit reads from a dataset's folders
PARTITION_KEYS = ("host", "date")
_KIND = "powerkit dataset"
_MAX_MANIFEST_BYTES = 64 * 1024 * 1024
_DAY_US = 86_400 * 10**6


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _walk(root: Path, warnings: list[str]) -> list[Path]:
    """Every visible ``*.parquet`` under ``root``, links to folders not followed."""
    found: list[Path] = []
    real_root = root.resolve()
    skipped_links = 0
    for here, dirs, names in os.walk(root, followlinks=False):
        base = Path(here)
        keep = []
        for d in sorted(dirs):
            if _hidden(d):
                continue
            if (base / d).is_symlink():
                skipped_links += 1
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(names):
            if _hidden(name) or not name.endswith(".parquet"):
                continue
            f = base / name
            if f.is_symlink() and not f.resolve().is_relative_to(real_root):
                warnings.append(f"{f}: a link to a file outside the dataset; not read")
                continue
            found.append(f)
    if skipped_links:
        warnings.append(
            f"{root}: {skipped_links} linked folder(s) not followed (a dataset is read "
            "from its own folders only)"
        )
    return sorted(found)


def _read_manifest(root: Path) -> dict[str, Any] | None:
    path = root / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        raise BadInputError(f"{path}: the dataset's manifest is not a plain file")
    if path.stat().st_size > _MAX_MANIFEST_BYTES:
        raise BadInputError(f"{path}: the dataset's manifest is over 64 MB")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{path}: the dataset's manifest is not JSON ({exc})") from None
    ok = isinstance(doc, dict) and doc.get("kind") == _KIND
    for key in ("files", "pending", "removing"):
        value = doc.get(key, []) if isinstance(doc, dict) else None
        ok = ok and isinstance(value, list) and all(isinstance(v, str) for v in value)
    if not ok:
        raise BadInputError(f"{path}: not a powerkit dataset manifest (kind, files, pending)")
    return doc


def _member(root: Path, rel: str) -> Path:
    """The file a manifest entry names, refusing one that would lead out of the dataset."""
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or any(p in ("..", ".") for p in parts):
        raise BadInputError(f"{root / MANIFEST}: entry {rel!r} is not a path inside the dataset")
    here = root
    for p in parts[:-1]:
        here = here / p
        if here.is_symlink():
            raise BadInputError(f"{here}: a linked folder inside the dataset; not followed")
    f = root / rel
    if f.is_symlink() and not f.resolve().is_relative_to(root.resolve()):
        raise BadInputError(f"{f}: a link to a file outside the dataset; not read")
    return f


def dataset_files(root: Path) -> tuple[list[Path], list[str]]:
    """Return (the files of the dataset at ``root``, warnings about what was not read)."""
    root = Path(root)
    warnings: list[str] = []
    doc = _read_manifest(root)
    if doc is None:
        found = _walk(root, warnings)
        for f in found:
            check_utf8_name(f)
        return found, warnings
    files = [_member(root, rel) for rel in doc["files"]]
    for f in files:
        check_utf8_name(f)
        if not f.is_file():
            raise BadInputError(f"{f}: listed in the dataset's manifest but missing")
    listed = {f.resolve() for f in files}
    extra = [f for f in _walk(root, []) if f.resolve() not in listed]
    if extra:
        pending = {(root / rel).resolve() for rel in doc["pending"] + doc["removing"]}
        ours = sum(f.resolve() in pending for f in extra)
        what = (
            f"{ours} left by an unfinished write (the next write removes them)"
            if ours == len(extra)
            else f"{len(extra)} not in its manifest (e.g. {extra[0]}; files added by hand or "
            "left by an unfinished write)"
        )
        warnings.append(f"{root}: {len(extra)} Parquet file(s) not read: {what}")
    return files, warnings


def partition_of(path: Path) -> dict[str, str]:
    """The hive keys (host, date) of a file, ``path`` relative to its dataset's folder."""
    keys = {}
    for part in Path(path).parts[:-1]:
        key, eq, value = part.partition("=")
        if eq and key in PARTITION_KEYS and key not in keys:
            keys[key] = urllib.parse.unquote(value)
    return keys


def _partition_value(text: str) -> str:
    """A host name as a hive partition value (``/`` and ``=`` would break the path)."""
    return urllib.parse.quote(text, safe=" ._-:@")


def _safe_folder(root: Path, *levels: str) -> Path:
    """Create ``root/level/...`` refusing a level that is a link or not a folder."""
    here = root
    for level in levels:
        here = here / level
        if here.is_symlink():
            raise BadInputError(f"{here}: a linked folder inside the dataset; not written through")
        if here.exists() and not here.is_dir():
            raise BadInputError(f"{here}: is a file, not a partition folder")
        here.mkdir(exist_ok=True)
    return here


def _manifest_text(files: list[str], pending: list[str], removing: list[str]) -> str:
    doc = {"kind": _KIND, "version": 1, "files": files, "pending": pending, "removing": removing}
    return json.dumps(doc, indent=1) + "\n"


def _legacy_files(visible: list[str]) -> list[str]:
    """Of a folder's visible files (relative paths), those an older powerkit wrote
    (``host=H/date=D/part-N.parquet``), for a folder without a manifest: the only ones a
    replacing write may remove there."""
    out = []
    for rel in visible:
        p = Path(rel).parts
        if (
            len(p) == 3
            and p[0].startswith("host=")
            and p[1].startswith("date=")
            and p[2].startswith("part-")
        ):
            out.append(rel)
    return out


def _remove(root: Path, rels: list[str]) -> None:
    for rel in rels:
        with contextlib.suppress(OSError, BadInputError):
            f = _member(root, rel)
            if f.is_file() and not f.is_symlink():
                f.unlink()
            for parent in f.relative_to(root).parents:  # an emptied partition folder
                if parent == Path("."):
                    break
                with contextlib.suppress(OSError):
                    (root / parent).rmdir()


def write_dataset(
    trace: Trace, meta: TraceMeta, folder: Path, *, memory_limit: str | None = None
) -> list[tuple[str, int, int]]:
    """Write ``trace`` as the dataset at ``folder`` (``host=H/date=YYYY-MM-DD/part-X.parquet``,
    UTC days, each file a sorted canonical trace with that host's metadata), replacing the
    files of the dataset already there in one step (see the module docstring). Return the
    series index over all files."""
    folder = Path(folder)
    if folder.is_symlink():
        raise BadInputError(f"{folder}/: is a symbolic link; give the dataset's own folder")
    folder.mkdir(parents=True, exist_ok=True)
    doc = _read_manifest(folder)
    if doc is None:  # a folder without a manifest: readers see every file, powerkit owns some
        visible = [f.relative_to(folder).as_posix() for f in _walk(folder, [])]
        old, leftovers = _legacy_files(visible), []
    else:
        visible = old = list(doc["files"])
        leftovers = list(doc["pending"]) + list(doc["removing"])
    _remove(folder, leftovers)
    con = connect(memory_limit)
    try:
        trace.register(con)
        parts = con.execute(
            f"SELECT DISTINCT host, epoch_us(ts) // {_DAY_US} AS day FROM trace ORDER BY 1, 2"
        ).fetchall()
    finally:
        con.close()
    # a name no file of the folder has: a new file never replaces an old one in place
    taken = {f.name for f in folder.rglob("part-*.parquet")}
    stamp = 0
    while f"part-{stamp}.parquet" in taken:
        stamp += 1
    plan = []
    for host, day in parts:
        date = datetime.fromtimestamp(int(day) * 86_400, UTC).strftime("%Y-%m-%d")
        levels = (f"host={_partition_value(str(host))}", f"date={date}")
        plan.append((host, int(day), levels, "/".join((*levels, f"part-{stamp}.parquet"))))
    new = [rel for *_, rel in plan]
    manifest = folder / MANIFEST
    # 1. the files about to be written are named first, so that a kill leaves them findable
    write_text(manifest, _manifest_text(visible, new, []))
    try:
        index: list[tuple[str, int, int]] = []
        for host, day, levels, rel in plan:
            path = _safe_folder(folder, *levels)
            part_meta = dataclasses.replace(meta, gpus=[g for g in meta.gpus if g.host == host])
            where = (
                f"host = {sql_text(str(host))} AND epoch_us(ts) >= {day * _DAY_US} "
                f"AND epoch_us(ts) < {(day + 1) * _DAY_US}"
            )
            index += write_sorted(
                trace, part_meta, path / Path(rel).name, where=where, memory_limit=memory_limit
            )
    except BaseException:  # the old dataset stays what readers see; the new files go
        _remove(folder, new)
        with contextlib.suppress(OSError):
            if doc is None:
                manifest.unlink()
            else:
                write_text(manifest, _manifest_text(visible, [], []))
        raise
    replaced = [rel for rel in old if rel not in new]
    write_text(manifest, _manifest_text(new, [], replaced))  # 3. the commit
    _remove(folder, replaced)
    write_text(manifest, _manifest_text(new, [], []))
    return index
