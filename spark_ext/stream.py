"""Tailing a live WAL: offsets, micro-batch ranges and space names. No pyspark.

The streaming `xlog` source (sources.py) is a thin shell around `WalTail`.

Offsets. A WAL directory's xlogs form one sequence ordered by signature (the
file name). A stream position is one point in it:

    {"file": "00000000000000000042.xlog", "pos": 1234}

`pos` is the byte offset in `file` just after the last whole transaction read
(0: before the file's first row; "" as file: before any file). Every file
before `file` is fully read, nothing after `pos` is. A micro-batch (start, end]
is then: the rest of start's file, every file between, and the head of end's
file up to end's `pos` — each a ScanTask with fixed byte bounds, so a batch
read again after a failure gives the same rows.

Why this gives no gaps and no duplicates across rotations: the WAL writer seals
a file (EOF marker) before it creates the next one, and creates it under a
temporary name renamed into place; so once a newer file is listed, the older
one will not grow and its rest is read to the EOF marker exactly once. In the
newest file only complete blocks whose last row ends a transaction are taken
(`tail_position`), so a transaction is never split between batches and a block
being written is left for a later batch. A file that disappears (WAL garbage
collection) before the stream read it is an error, not a silent gap.

Space names. Each ScanTask carries the names as of its start; `NameCursor`
keeps them on the driver between batches and advances over new bytes looking
only at blocks that can hold `_space` rows.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from spindle.core.xlog.files import parse_filename
from spindle.core.xlog.format import XlogError

from .plan import _space_events, file_info, plan_tasks
from .rows import SpaceNames, space_row_markers
from .scan import ROW_ERRORS, XLOG_KIND, ScanTask, iter_rows, open_file, payloads

START_EARLIEST, START_LATEST = "earliest", "latest"
_NO_SPLIT = 1 << 62


def offset(file: str, pos: int) -> dict:
    return {"file": file, "pos": int(pos)}


def wal_files(wal_dir: str) -> list[str]:
    """Base names of the finished xlogs of a directory, in WAL order."""
    names = []
    for name in os.listdir(wal_dir):
        parsed = parse_filename(name)
        if parsed is not None and parsed[1] == ".xlog":
            names.append((parsed[0], name))
    return [name for _, name in sorted(names)]


def tail_position(path: str, start: int = 0) -> tuple[int, bool]:
    """(offset after the last complete block of `path`, at or after `start`,
    whose last row ends a transaction; whether the file is sealed by its EOF
    marker). 0 means no such block: nothing to read yet."""
    reader = open_file(path)
    if start > reader.header_size:
        reader.close()
        reader = open_file(path, start=start)
    with reader:
        good = start
        for pos, size, data in payloads(reader, check=False):
            commit = True
            try:
                for row in iter_rows(data):
                    commit = row[6]
            except ROW_ERRORS as exc:
                raise XlogError(f"{path}: can't parse row at offset {pos}: {exc}") from exc
            if commit:
                good = pos + size
        return good, reader.eof_marker


@dataclass(frozen=True)
class Segment:
    """Rows of one file from `start` (0: after the header) to `end` (None: to
    the end of the file)."""

    name: str
    start: int
    end: int | None


def segments(names: list[str], start: dict, end: dict) -> list[Segment]:
    """The byte ranges a batch (start, end] reads, given the directory listing."""
    start_file, start_pos = start["file"], int(start["pos"])
    end_file, end_pos = end["file"], int(end["pos"])
    if not end_file or (start_file, start_pos) == (end_file, end_pos):
        return []
    if start_file and start_file not in names:
        raise XlogError(f"{start_file}: removed before the stream read it "
                        "(WAL garbage collection); rows after it would be lost")
    if end_file not in names:
        raise XlogError(f"{end_file}: removed before the stream read it")
    out = []
    for name in names:
        if start_file and name < start_file:
            continue
        if name > end_file:
            break
        begin = start_pos if name == start_file else 0
        stop = end_pos if name == end_file else None
        if stop is not None and stop <= begin:
            continue
        out.append(Segment(name, begin, stop))
    return out


class NameCursor:
    """Space names at a stream position, advanced incrementally (driver side)."""

    def __init__(self, wal_dir: str):
        self.wal_dir = wal_dir
        self.file = ""
        self.pos = 0
        self.names = SpaceNames()
        self._markers = space_row_markers()

    def at(self, name: str, pos: int) -> dict[int, str]:
        """Names in force at (name, pos)."""
        if self.file != name or self.pos > pos:
            self._start_of(name)
        self.advance(pos)
        return dict(self.names.names)

    def _start_of(self, name: str) -> None:
        path = os.path.join(self.wal_dir, name)
        tasks = plan_tasks(path, XLOG_KIND, split_bytes=_NO_SPLIT)
        # One file, one range: its task has the names in force at the file's start.
        names = tasks[0].names if tasks else {}
        self.file, self.pos, self.names = name, 0, SpaceNames(dict(names))

    def advance(self, to: int | None) -> None:
        """Apply the `_space` rows between the cursor and `to` (None: file end)."""
        path = os.path.join(self.wal_dir, self.file)
        with open_file(path, start=self.pos or None, end=to) as reader:
            pos = reader.position
            for at, size, data in payloads(reader, check=False):
                if any(m in data for m in self._markers):
                    for event in _space_events(data, at, path):
                        self.names.apply(*event[1:])
                pos = at + size
        self.pos = pos if to is None else max(self.pos, to)


class WalTail:
    """The driver side of the streaming source over one WAL directory."""

    def __init__(self, wal_dir: str, starting: str = START_LATEST):
        if starting not in (START_EARLIEST, START_LATEST):
            raise ValueError(f"startingOffsets must be 'earliest' or 'latest', not {starting!r}")
        self.wal_dir = os.path.abspath(wal_dir)
        if not os.path.isdir(self.wal_dir):
            raise FileNotFoundError(f"{self.wal_dir}: not a directory")
        self.starting = starting
        self.cursor = NameCursor(self.wal_dir)
        self._tail = ("", 0)        # (newest file, its tail) found last time

    def initial(self) -> dict:
        if self.starting == START_EARLIEST:
            names = wal_files(self.wal_dir)
            return offset(names[0], 0) if names else offset("", 0)
        return self.latest()

    def latest(self) -> dict:
        """The newest whole-transaction point. When the newest file has none
        yet (just rotated), the end of the newest file that has rows: a sealed
        file does not change, so that offset stays exact."""
        names = wal_files(self.wal_dir)
        for name in reversed(names):
            known_file, known_pos = self._tail
            pos, _ = tail_position(os.path.join(self.wal_dir, name),
                                   known_pos if known_file == name else 0)
            if name == names[-1]:
                self._tail = (name, pos)
            if pos:
                return offset(name, pos)
        return offset(names[0], 0) if names else offset("", 0)

    def tasks(self, start: dict, end: dict) -> list[ScanTask]:
        names = wal_files(self.wal_dir)
        out = []
        for seg in segments(names, start, end):
            path = os.path.join(self.wal_dir, seg.name)
            end_pos = seg.end
            info = file_info(path, XLOG_KIND)
            names_now = self.cursor.at(seg.name, seg.start)
            out.append(ScanTask(path, XLOG_KIND, seg.start or None, end_pos, names_now,
                                lsn_floor=dict(info.vclock)))
            self.cursor.advance(end_pos)
        return out
