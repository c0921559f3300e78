"""What a query over `xlog` / `snap` reads: files, ranges, space names. No pyspark.

`plan_tasks(path, kind, filters)` turns the `path` option (a file, a directory
or a glob) into ScanTasks, one per file or per block range of a large file.

Space names. A row's `space_name` is the name its space had when the row was
written, so `_space` rows are replayed in WAL order. For the xlogs of one
directory the replay starts from the newest snapshot at or before the first
file read (its `_space` rows), or from 2.6.0's bootstrap system spaces when
the directory has no such snapshot, and goes through every xlog of the
directory up to the last one read (files outside the selection included: a
space created in an earlier file keeps its name in later ones). A snapshot's
rows are named by that snapshot's own `_space` rows.

The pre-pass that finds `_space` rows decodes rows only in blocks holding the
bytes of a `_space` SPACE_ID (rows.space_row_markers), so it costs little more
than reading the files; its result is cached per file (path, size, mtime).

Skipping. An xlog's rows of replica R have LSNs in (VClock[R] of its header,
VClock[R] of the next file's header]; a file whose ranges cannot meet the
`lsn` / `replica_id` filters gets no task at all.
"""
from __future__ import annotations

import glob
import os
from collections import OrderedDict
from dataclasses import dataclass, field

from spindle.core.box.schema import load_bootstrap_rows
from spindle.core.xlog.files import parse_filename
from spindle.core.xlog.format import SNAP, XLOG, XlogError

from .rows import DML_TYPES, INSERT, SPACE_SPACE_ID, RowFilter, SpaceNames, space_row_markers
from .scan import (
    ROW_ERRORS, SNAP_KIND, XLOG_KIND, ScanTask, file_meta, iter_rows, open_file, payloads,
)

DEFAULT_SPLIT_BYTES = 64 << 20
VCLOCK_MAX = 32
EXTENSIONS = {XLOG_KIND: ".xlog", SNAP_KIND: ".snap"}
FILETYPES = {XLOG_KIND: XLOG, SNAP_KIND: SNAP}
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class FileInfo:
    path: str
    kind: str
    signature: int
    vclock: dict[int, int]
    size: int
    mtime_ns: int


def file_info(path: str, kind: str) -> FileInfo:
    meta = file_meta(path)
    if meta.filetype != FILETYPES[kind]:
        raise XlogError(f"{path}: not a {FILETYPES[kind]} file (it is {meta.filetype})")
    st = os.stat(path)
    vclock = dict(meta.vclock.items()) if meta.vclock is not None else {}
    return FileInfo(os.path.abspath(path), kind, sum(vclock.values()), vclock,
                    st.st_size, st.st_mtime_ns)


def _dir_files(dirname: str, kind: str) -> list[str]:
    """Finished files of `kind` in a directory (never `.inprogress` ones)."""
    ext = EXTENSIONS[kind]
    out = []
    for name in os.listdir(dirname):
        parsed = parse_filename(name)
        if parsed is not None and parsed[1] == ext:
            out.append(os.path.join(dirname, name))
    return out


def discover(path: str, kind: str) -> list[FileInfo]:
    """The files the `path` option names, ordered by (directory, signature)."""
    if not path:
        raise ValueError("the `path` option is required (a file, a directory or a glob)")
    if _GLOB_CHARS & set(path):
        matches = sorted(glob.glob(path, recursive=True))
    else:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file or directory")
        matches = [path]
    paths: set[str] = set()
    for match in matches:
        if os.path.isdir(match):
            paths.update(_dir_files(match, kind))
        elif match.endswith(EXTENSIONS[kind]):
            paths.add(match)
        elif match == path:
            paths.add(match)    # a file named explicitly: its header decides
    infos = [file_info(p, kind) for p in paths]
    return sorted(infos, key=lambda f: (os.path.dirname(f.path), f.signature, f.path))


# ---------------------------------------------------------------------------
# Pre-pass: split points and `_space` rows of a file.

@dataclass
class Structure:
    """Block offsets where ranges start (the first is the header's end), and
    the DML rows on `_space` as (block offset, type, key, tuple, ops, index_base)."""

    splits: list[int]
    events: list[tuple] = field(default_factory=list)


_CACHE: OrderedDict[tuple, object] = OrderedDict()
_CACHE_MAX = 512


def _cached(key: tuple, compute):
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    value = compute()
    _CACHE[key] = value
    while len(_CACHE) > _CACHE_MAX:
        _CACHE.popitem(last=False)
    return value


def _space_events(data: bytes, block_pos: int, path: str) -> list[tuple]:
    events = []
    try:
        for (_, rtype, _, _, _, _, _, _, space_id, _, index_base,
             ks, ke, ts, te, os_, oe) in iter_rows(data):
            if space_id == SPACE_SPACE_ID and rtype in DML_TYPES:
                events.append((block_pos, rtype, data[ks:ke] if ks >= 0 else None,
                               data[ts:te] if ts >= 0 else None,
                               data[os_:oe] if os_ >= 0 else None, index_base))
    except ROW_ERRORS as exc:
        raise XlogError(f"{path}: can't parse row at offset {block_pos}: {exc}") from exc
    return events


def file_structure(info: FileInfo, split_bytes: int, *, events: bool = True) -> Structure:
    """Split points of any file; with `events`, its `_space` rows too (xlogs)."""
    def compute() -> Structure:
        markers = space_row_markers()
        with open_file(info.path) as reader:
            range_start = reader.header_size
            result = Structure([range_start])
            for pos, _, data in payloads(reader, check=False, payload=events):
                if pos - range_start >= split_bytes:
                    result.splits.append(pos)
                    range_start = pos
                if events and any(m in data for m in markers):
                    result.events.extend(_space_events(data, pos, info.path))
        return result
    return _cached(("structure", info.path, info.size, info.mtime_ns, split_bytes, events), compute)


def snapshot_names(info: FileInfo) -> dict[int, str]:
    """The `_space` rows of a snapshot. Spaces come in ascending id order, so
    reading stops at the first row of a space after `_space`."""
    def compute() -> dict[int, str]:
        names = SpaceNames()
        with open_file(info.path) as reader:
            for pos, _, data in payloads(reader, check=False):
                try:
                    for row in iter_rows(data):
                        space_id, tup_s, tup_e = row[8], row[13], row[14]
                        if space_id is not None and space_id > SPACE_SPACE_ID:
                            return names.names
                        if space_id == SPACE_SPACE_ID and tup_s >= 0:
                            names.apply(INSERT, None, data[tup_s:tup_e], None)
                except ROW_ERRORS as exc:
                    raise XlogError(f"{info.path}: can't parse row at offset {pos}: {exc}") \
                        from exc
        return names.names
    return _cached(("snapnames", info.path, info.size, info.mtime_ns), compute)


def snap_splits(info: FileInfo, split_bytes: int) -> list[int]:
    if info.size <= split_bytes:
        return [None]
    return file_structure(info, split_bytes, events=False).splits


def bootstrap_names() -> dict[int, str]:
    """System spaces of a fresh 2.6.0 instance, for xlogs without a snapshot."""
    def compute() -> dict[int, str]:
        names = SpaceNames()
        for space_id, tup in load_bootstrap_rows():
            if space_id == SPACE_SPACE_ID:
                names.load_tuple(tup)
        return names.names
    return _cached(("bootstrap",), compute)


# ---------------------------------------------------------------------------
# Planning.

def _may_match(filters: RowFilter, floor: dict[int, int], ceiling: dict[int, int] | None,
               ) -> bool:
    """Can a row of an xlog whose LSN ranges are (floor, ceiling] pass?"""
    lsn = filters.get("lsn")
    replicas = filters.get("replica_id")
    if lsn is None and replicas is None:
        return True
    candidates = ceiling.keys() if ceiling is not None else range(VCLOCK_MAX)
    for replica in candidates:
        low = floor.get(replica, 0) + 1
        high = ceiling[replica] if ceiling is not None else 1 << 64
        if low > high:
            continue
        if replicas is not None and not replicas.accepts(replica):
            continue
        if lsn is None or lsn.overlaps(low, high):
            return True
    return False


def _ranges(splits: list, path: str, kind: str, **common) -> list[ScanTask]:
    tasks = []
    for i, start in enumerate(splits):
        end = splits[i + 1] if i + 1 < len(splits) else None
        tasks.append(ScanTask(path, kind, start, end, **common))
    return tasks


def plan_tasks(path: str, kind: str, filters: RowFilter | None = None, *,
               split_bytes: int = DEFAULT_SPLIT_BYTES,
               exclude: frozenset[str] | set[str] = frozenset()) -> list[ScanTask]:
    """ScanTasks for the files `path` names, minus those in `exclude`
    (absolute paths: files another source, e.g. the Parquet mirror, answers for)."""
    filters = filters or RowFilter()
    if filters.impossible:
        return []
    selected = discover(path, kind)
    exclude = {os.path.abspath(p) for p in exclude}
    if kind == SNAP_KIND:
        tasks = []
        for info in selected:
            if info.path in exclude:
                continue
            names = snapshot_names(info)
            tasks += _ranges(snap_splits(info, split_bytes), info.path, kind, names=names)
        return tasks
    by_dir: dict[str, list[FileInfo]] = {}
    for info in selected:
        by_dir.setdefault(os.path.dirname(info.path), []).append(info)
    tasks = []
    for dirname, infos in by_dir.items():
        tasks += _plan_dir(dirname, infos, filters, split_bytes, exclude)
    return tasks


def _plan_dir(dirname: str, selected: list[FileInfo], filters: RowFilter, split_bytes: int,
              exclude: set[str]) -> list[ScanTask]:
    wanted = {info.path for info in selected}
    first, last = selected[0], selected[-1]
    timeline = {info.path: info for info in selected}
    for p in map(os.path.abspath, _dir_files(dirname, XLOG_KIND)):
        if p not in timeline:
            timeline[p] = file_info(p, XLOG_KIND)
    files = sorted(timeline.values(), key=lambda f: (f.signature, f.path))
    snaps = [file_info(p, SNAP_KIND) for p in _dir_files(dirname, SNAP_KIND)]
    base = max((s for s in snaps if s.signature <= first.signature),
               key=lambda s: s.signature, default=None)
    names = SpaceNames(dict(snapshot_names(base) if base is not None else bootstrap_names()))
    tasks = []
    for i, info in enumerate(files):
        if base is not None and info.signature < base.signature:
            continue                 # what it did to _space is in the snapshot
        # Rows of replica R in this file have LSNs up to the next file's VClock[R].
        ceiling = files[i + 1].vclock if i + 1 < len(files) else None
        is_last = info.path == last.path
        read = (info.path in wanted and info.path not in exclude
                and _may_match(filters, info.vclock, ceiling))
        if is_last and not read:
            break
        if is_last and info.size <= split_bytes:
            structure = Structure([None])     # one range, and no later file needs names
        else:
            structure = file_structure(info, split_bytes)
        if read:
            tasks += _tasks_with_names(info, structure, names, ceiling)
        if is_last:
            break
        for event in structure.events:
            names.apply(*event[1:])
    return tasks


def _tasks_with_names(info: FileInfo, structure: Structure, names: SpaceNames,
                      ceiling: dict[int, int] | None) -> list[ScanTask]:
    """One task per range, each with the names as of its first block."""
    splits = structure.splits
    if len(splits) == 1:
        splits = [None]
    tasks = []
    current = names.copy()
    events = iter(structure.events)
    pending = next(events, None)
    for i, start in enumerate(splits):
        while pending is not None and start is not None and pending[0] < start:
            current.apply(*pending[1:])
            pending = next(events, None)
        end = splits[i + 1] if i + 1 < len(splits) else None
        tasks.append(ScanTask(info.path, XLOG_KIND, start, end, dict(current.names),
                              lsn_floor=dict(info.vclock), lsn_ceiling=ceiling))
    return tasks
