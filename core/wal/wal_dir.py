"""The xlog files of the WAL directory, as the WAL writer keeps them (the files side of
wal.c): the index of their vclocks, the file being written, rotation, cutting a
failed write back, and garbage collection.

Files follow wal.c: an xlog is created on the first write after start or rotation and
is named by the vclock before its first row; `rotate()` (checkpoints) closes the current
file only if it has rows; at `stop()` an empty xlog named by the final vclock is left
when the current file has rows, so the next start finds its vclock without a scan.
Each file is written by the one xlog writer (core/xlog/files.XlogWriter, through
WalIO's system calls): the bytes, the early rename and the EOF marker are its.

WalDir is the part of the writer state that lives on disk; WalWriter (writer.py)
derives from it. Like the rest of that state it has one owner at a time (the WAL
thread, or tx writing inline), so nothing here locks.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import cast

from spindle.core import log
from spindle.core.iproto.errors import ClientError
from spindle.core.vclock import VClock
from spindle.core.xlog.files import (
    XlogIO, XlogReader, XlogWriter, format_filename, list_files, read_meta,
)
from spindle.core.xlog.format import EOF_MARKER_BYTES, XLOG, XlogError, XlogMeta

from .journal import JournalEntry

XLOG_EXT = ".xlog"


class WalIO(XlogIO):
    """The system calls of the WAL's XlogWriter. Tests subclass it to count fsyncs or
    to make writes fail (a full disk) and recover."""

    def fsync(self, fd: int) -> None:
        # data only, as 2.6.0's WAL: the size a block adds is what fdatasync keeps
        os.fdatasync(fd)


class WalDir:
    """The xlogs of `wal_dir` and the one being written (`_file`). The writer sets
    these attributes; the methods are its file operations."""

    wal_dir: str
    instance_uuid: str
    mode: str
    max_size: int
    compress: bool
    io: WalIO
    _wal_vclock: VClock          # the vclock after the last row written
    _file: XlogWriter | None
    _index: list[VClock]         # header vclocks of the xlogs in the dir, oldest first

    def _cut_back(self, current: XlogWriter, start: int, exc: Exception,
                  entries: Iterable[JournalEntry]) -> None:
        """A write to `current` from offset `start` failed: log it and cut the file
        back to `start`, or leave the file for a new one if it cannot be cut."""
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        log.error("%s: failed to write to disk: %s", current.path, reason)
        try:
            current.truncate(start)
        except OSError as cut_exc:
            # The tail cannot be cut: never append after it, start a new file.
            log.error("%s: failed to truncate: %s", current.path, cut_exc)
            self._abandon_file()
        for entry in entries:
            entry.vclock = None

    def _prepare_file(self) -> XlogWriter:
        """wal_opt_rotate(): close a full file, create the next one if none is open."""
        current = self._file
        if current is not None and current.offset >= self.max_size and current.has_rows:
            self._close_file()
            current = None
        if current is None:
            current = self._file = self._create_file(self._wal_vclock)
        return current

    def _create_file(self, vclock: VClock) -> XlogWriter:
        prev = self._index[-1].copy() if self._index else None
        meta = XlogMeta(XLOG, self.instance_uuid, vclock.copy(), prev)
        current = XlogWriter.create(self.wal_dir, meta, compress=self.compress, io=self.io)
        self._index.append(vclock.copy())
        return current

    def _close_file(self) -> None:
        """Seal the current file: its EOF marker, fsync (a WAL file exists only when
        wal_mode is not 'none'), close. A failure is logged: the rows are written."""
        current, self._file = self._file, None
        if current is None:
            return
        try:
            current.close()
        except OSError as exc:
            log.error("%s: failed to close: %s", current.path, exc)

    def _abandon_file(self) -> None:
        current, self._file = self._file, None
        if current is not None:
            current.abandon()

    def _shutdown(self) -> None:
        current = self._file
        # (the header of an xlog being written always has its vclock: _create_file
        # writes it, _open_current reopens the file named by it)
        if current is None or self._wal_vclock.compare(cast(VClock, current.meta.vclock)) == 1:
            try:
                self._close_file()
                path = os.path.join(self.wal_dir,
                                    format_filename(self._wal_vclock.signature, XLOG_EXT))
                if not os.path.exists(path):
                    self._file = self._create_file(self._wal_vclock)
            except OSError as exc:
                log.error("failed to create the last xlog: %s", exc)
        self._close_file()

    def _collect_garbage(self, vclock: VClock) -> list[str]:
        if self._file is None and vclock.signature >= self._wal_vclock.signature:
            keep_from = vclock.signature
        else:
            older = [clock.signature for clock in self._index
                     if clock.compare(vclock) in (-1, 0)]
            if not older:
                return []
            keep_from = max(older)
        removed = []
        for clock in list(self._index):
            if clock.signature >= keep_from:
                continue
            path = os.path.join(self.wal_dir, format_filename(clock.signature, XLOG_EXT))
            if self._file is not None and path == self._file.path:
                continue
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.error("error while removing %s: %s", path, exc)
                continue
            log.info("removed %s", path)
            removed.append(path)
            self._index.remove(clock)
        return removed

    def _scan_index(self) -> None:
        index = []
        for entry in list_files(self.wal_dir, XLOG_EXT):
            try:
                meta = read_meta(entry.path)
            except (XlogError, OSError) as exc:
                log.error("XlogError: %s: %s", entry.path, exc)
                continue
            if meta.vclock is None or meta.signature != entry.signature:
                continue
            index.append(meta.vclock)
        self._index = sorted(index, key=lambda clock: clock.signature)

    def _open_current(self) -> XlogWriter | None:
        """Reopen the xlog named by the vclock for appending (wal_open): its EOF marker
        and any torn tail are cut so new blocks follow the last whole one. A file whose
        header cannot be read is renamed `.corrupted`, as 2.6.0 does."""
        path = os.path.join(self.wal_dir, format_filename(self._wal_vclock.signature, XLOG_EXT))
        if not os.path.exists(path):
            return None
        try:
            with XlogReader(path, expected_type=XLOG, force_recovery=True,
                            with_rows=False) as reader:
                for _ in reader.blocks():
                    pass
                end = reader.position - (len(EOF_MARKER_BYTES) if reader.eof_marker else 0)
                meta = reader.meta
            if meta.instance_uuid != self.instance_uuid:
                raise XlogError(f"{path}: invalid instance UUID")
        except (XlogError, ClientError) as exc:
            log.error("XlogError: %s", exc)
            log.warn("renaming corrupted %s", path)
            os.rename(path, path + ".corrupted")
            self._index = [c for c in self._index if c.signature != self._wal_vclock.signature]
            return None
        return XlogWriter.open_for_append(path, valid_size=end, compress=self.compress,
                                          io=self.io)
