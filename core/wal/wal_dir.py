"""The xlog files of the WAL directory, as the WAL writer keeps them (the files side of
wal.c): the index of their vclocks, the file being written, rotation, cutting a
failed write back, and garbage collection.

Files follow wal.c: an xlog is created on the first write after start or rotation and
is named by the vclock before its first row; `rotate()` (checkpoints) closes the current
file only if it has rows; at `stop()` an empty xlog named by the final vclock is left
when the current file has rows, so the next start finds its vclock without a scan.

WalDir is the part of the writer state that lives on disk; WalWriter (writer.py)
derives from it. Like the rest of that state it has one owner at a time (the WAL
thread, or tx writing inline), so nothing here locks.
"""
from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from spindle.core import log
from spindle.core.iproto.errors import ClientError
from spindle.core.vclock import VClock
from spindle.core.xlog.files import (
    INPROGRESS_SUFFIX, XlogReader, format_filename, list_files, read_meta,
)
from spindle.core.xlog.format import EOF_MARKER_BYTES, XLOG, XlogError, XlogMeta, encode_block

from .journal import JournalEntry

XLOG_EXT = ".xlog"


class WalIO:
    """The system calls the WAL thread makes. Tests subclass it to count fsyncs or to
    make writes fail (a full disk) and recover."""

    def open_new(self, path: str) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)

    def write(self, fd: int, data: bytes) -> None:
        written = os.write(fd, data)
        if written < len(data):         # a short write: the rest, piece by piece
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view):]

    def fsync(self, fd: int) -> None:
        os.fdatasync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)
        os.lseek(fd, size, os.SEEK_SET)

    def close(self, fd: int) -> None:
        os.close(fd)


@dataclass
class WalFile:
    """The xlog being written: the next block goes at `offset`."""

    path: str
    fd: int
    meta: XlogMeta
    offset: int
    header_size: int

    @property
    def has_rows(self) -> bool:
        return self.offset > self.header_size


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
    _file: WalFile | None
    _index: list[VClock]         # header vclocks of the xlogs in the dir, oldest first

    def _cut_back(self, current: WalFile, start: int, exc: Exception,
                  entries: Iterable[JournalEntry]) -> None:
        """A write to `current` from offset `start` failed: log it and cut the file
        back to `start`, or leave the file for a new one if it cannot be cut."""
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        log.error("%s: failed to write to disk: %s", current.path, reason)
        try:
            self.io.truncate(current.fd, start)
            current.offset = start
        except OSError as cut_exc:
            # The tail cannot be cut: never append after it, start a new file.
            log.error("%s: failed to truncate: %s", current.path, cut_exc)
            self._abandon_file()
        for entry in entries:
            entry.vclock = None

    def _write_block(self, current: WalFile, data: bytes) -> None:
        block = encode_block(data, compress=self.compress)
        self.io.write(current.fd, block)
        current.offset += len(block)

    def _prepare_file(self) -> WalFile:
        """wal_opt_rotate(): close a full file, create the next one if none is open."""
        current = self._file
        if current is not None and current.offset >= self.max_size and current.has_rows:
            self._close_file()
            current = None
        if current is None:
            current = self._file = self._create_file(self._wal_vclock)
        return current

    def _create_file(self, vclock: VClock) -> WalFile:
        prev = self._index[-1].copy() if self._index else None
        meta = XlogMeta(XLOG, self.instance_uuid, vclock.copy(), prev)
        path = os.path.join(self.wal_dir, format_filename(vclock.signature, XLOG_EXT))
        if os.path.exists(path):
            raise FileExistsError(errno.EEXIST, f"file '{path}' already exists", path)
        tmp = path + INPROGRESS_SUFFIX
        fd = self.io.open_new(tmp)
        header = meta.encode()
        try:
            self.io.write(fd, header)
            os.rename(tmp, path)
        except BaseException:
            self.io.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._index.append(vclock.copy())
        return WalFile(path, fd, meta, len(header), header_size=len(header))

    def _close_file(self) -> None:
        current, self._file = self._file, None
        if current is None:
            return
        try:
            self.io.write(current.fd, EOF_MARKER_BYTES)
            if self.mode != "none":
                self.io.fsync(current.fd)
        except OSError as exc:
            log.error("%s: failed to close: %s", current.path, exc)
        finally:
            self.io.close(current.fd)

    def _abandon_file(self) -> None:
        current, self._file = self._file, None
        if current is not None:
            try:
                self.io.close(current.fd)
            except OSError:
                pass

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

    def _open_current(self) -> WalFile | None:
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
                meta, header_size = reader.meta, reader.header_size
            if meta.instance_uuid != self.instance_uuid:
                raise XlogError(f"{path}: invalid instance UUID")
        except (XlogError, ClientError) as exc:
            log.error("XlogError: %s", exc)
            log.warn("renaming corrupted %s", path)
            os.rename(path, path + ".corrupted")
            self._index = [c for c in self._index if c.signature != self._wal_vclock.signature]
            return None
        fd = os.open(path, os.O_RDWR)
        try:
            self.io.truncate(fd, end)
        except BaseException:
            os.close(fd)
            raise
        return WalFile(path, fd, meta, end, header_size=header_size)
