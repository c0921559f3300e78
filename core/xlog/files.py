"""File I/O for .xlog / .snap on top of the codec in `format`.

* `XlogWriter` creates `<20-digit signature>.<ext>.inprogress`, writes the
  header and blocks, and on close writes the EOF marker, fsyncs and drops the
  `.inprogress` suffix. As in 2.6.0, an `.xlog` is renamed right after its
  header is written (rows that reach the disk must be visible to recovery
  after a crash; a leftover `.xlog.inprogress` only means a crash during
  creation), while a `.snap` keeps the suffix until it is complete.
* `XlogReader` iterates blocks, transactions or rows of one file, stops at the
  EOF marker, reports a torn tail, and can be resumed on a file that grows.
* `list_files` finds a directory's files by signature, `read_meta` reads a header.
"""
from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.xrow import XRow
from spindle.core.vclock import VClock
from spindle.core.xlog.format import (
    AUTOCOMMIT_THRESHOLD, EOF_MARKER_BYTES, FIXHEADER_SIZE, MARKER_SIZE, META_LEN_MAX, SNAP,
    VYLOG, XLOG, Block, BlockStream, CorruptBlock, EofMarker, NeedMore, XlogError,
    XlogHeaderError, XlogMeta, encode_block, encode_rows, parse_meta, split_transactions,
)

INPROGRESS_SUFFIX = ".inprogress"
EXT_BY_TYPE = {XLOG: ".xlog", SNAP: ".snap", VYLOG: ".vylog"}
_NAME_RE = re.compile(r"^(\d{20})(\.[a-z]+)$")


def format_filename(signature: int, ext: str) -> str:
    return f"{signature:020d}{ext}"


def parse_filename(name: str) -> tuple[int, str] | None:
    """(signature, extension) of a finished file's base name, else None."""
    match = _NAME_RE.match(name)
    return (int(match.group(1)), match.group(2)) if match else None


@dataclass(frozen=True, slots=True)
class XdirFile:
    signature: int
    path: str
    ext: str


def list_files(dirname: str, ext: str = ".xlog") -> list[XdirFile]:
    """Finished files with extension `ext`, ascending signature (no .inprogress)."""
    found = []
    for name in os.listdir(dirname):
        parsed = parse_filename(name)
        if parsed is not None and parsed[1] == ext:
            found.append(XdirFile(parsed[0], os.path.join(dirname, name), ext))
    return sorted(found, key=lambda f: f.signature)


def list_inprogress(dirname: str) -> list[str]:
    return sorted(os.path.join(dirname, name) for name in os.listdir(dirname)
                  if name.endswith(INPROGRESS_SUFFIX))


def remove_inprogress(dirname: str) -> list[str]:
    """Delete leftovers of interrupted writes, as 2.6.0 does at startup."""
    removed = list_inprogress(dirname)
    for path in removed:
        os.unlink(path)
    return removed


def read_meta(path: str) -> XlogMeta:
    with open(path, "rb") as f:
        head = f.read(META_LEN_MAX + 2)
    parsed = parse_meta(head)
    if parsed is None:
        raise XlogHeaderError(f"{path}: Unexpected end of file")
    return parsed[0]


# ---------------------------------------------------------------------------
# Writing.

class SyncPolicy(str, enum.Enum):
    NEVER = "never"    # no fsync at all (tests, throwaway files)
    CLOSE = "close"    # fsync when closing: wal_mode = 'write'
    WRITE = "write"    # fsync after every block too: wal_mode = 'fsync'


class XlogWriter:
    """Appends blocks to one file. Not thread-safe; one owner (the WAL thread or
    the checkpoint) writes it."""

    def __init__(self, path: str, fd: int, meta: XlogMeta, offset: int, *,
                 sync: SyncPolicy | str = SyncPolicy.CLOSE, compress: bool = True):
        self.path = path
        self.meta = meta
        self.offset = offset
        self.rows = 0
        self.sync_policy = SyncPolicy(sync)
        self.compress = compress
        self._fd: int | None = fd
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._buffered_rows = 0

    # -- creation -------------------------------------------------------------

    @classmethod
    def create(cls, dirname: str, meta: XlogMeta, *, sync: SyncPolicy | str = SyncPolicy.CLOSE,
               compress: bool = True, rename_on_close: bool | None = None) -> XlogWriter:
        """Create the file named by `meta`'s signature; never overwrites.

        `rename_on_close` defaults to True for .snap/.vylog and False for .xlog.
        """
        if meta.vclock is None:
            raise ValueError("a new file needs a VClock in its header")
        if rename_on_close is None:
            rename_on_close = meta.filetype != XLOG
        final = os.path.join(dirname, format_filename(meta.signature, EXT_BY_TYPE[meta.filetype]))
        if os.path.exists(final):
            raise FileExistsError(f"file '{final}' already exists")
        os.makedirs(dirname, exist_ok=True)
        path = final + INPROGRESS_SUFFIX
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        header = meta.encode()
        try:
            _write_all(fd, header)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        writer = cls(path, fd, meta, len(header), sync=sync, compress=compress)
        if not rename_on_close:
            writer._rename()
        return writer

    @classmethod
    def create_snapshot(cls, dirname: str, instance_uuid: str, vclock: VClock,
                        **kwargs) -> XlogWriter:
        return cls.create(dirname, XlogMeta(SNAP, instance_uuid, vclock.copy()), **kwargs)

    @classmethod
    def open_for_append(cls, path: str, *, valid_size: int | None = None,
                        sync: SyncPolicy | str = SyncPolicy.CLOSE,
                        compress: bool = True) -> XlogWriter:
        """Reopen a finished xlog to continue it: its EOF marker is cut off.

        `valid_size`, when given (the reader's position after the last good
        block), also cuts a torn tail, so new blocks never follow garbage.
        """
        meta = read_meta(path)
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
            if valid_size is not None and valid_size < size:
                size = valid_size
            elif size >= len(EOF_MARKER_BYTES) and os.pread(
                    fd, len(EOF_MARKER_BYTES), size - len(EOF_MARKER_BYTES)) \
                    == EOF_MARKER_BYTES:
                size -= len(EOF_MARKER_BYTES)
            os.ftruncate(fd, size)
            os.lseek(fd, size, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, meta, size, sync=sync, compress=compress)

    # -- writing --------------------------------------------------------------

    @property
    def in_progress(self) -> bool:
        return self.path.endswith(INPROGRESS_SUFFIX)

    @property
    def buffered_size(self) -> int:
        return self._buffered

    def add_tx(self, rows: Iterable[XRow]) -> int:
        """Buffer one whole transaction; a block is written once the buffer
        (fixheader included) reaches 128 KiB, never in the middle of a
        transaction. Returns the bytes written to the file now (0 if none)."""
        rows = list(rows)
        data = encode_rows(rows)
        self._buffer.append(data)
        self._buffered += len(data)
        self._buffered_rows += len(rows)
        if FIXHEADER_SIZE + self._buffered >= AUTOCOMMIT_THRESHOLD:
            return self.flush()
        return 0

    def add_row(self, row: XRow) -> int:
        """Buffer a row that is a transaction of its own (snapshot rows)."""
        return self.add_tx((row,))

    def write_tx(self, rows: Iterable[XRow]) -> int:
        """Write one transaction now, as one block (with anything buffered before)."""
        self.add_tx(rows)
        return self.flush()

    def flush(self) -> int:
        """Write the buffer as one block; returns its size in bytes."""
        if not self._buffered:
            return 0
        fd = self._open_fd()
        block = encode_block(b"".join(self._buffer), compress=self.compress)
        try:
            _write_all(fd, block)
        except BaseException:
            # Leave the file ending at the last good block, as xlog_tx_write does.
            os.ftruncate(fd, self.offset)
            os.lseek(fd, self.offset, os.SEEK_SET)
            raise
        self.offset += len(block)
        self.rows += self._buffered_rows
        self._buffer.clear()
        self._buffered = self._buffered_rows = 0
        if self.sync_policy is SyncPolicy.WRITE:
            os.fdatasync(fd)
        return len(block)

    def sync(self) -> None:
        os.fsync(self._open_fd())

    def close(self) -> None:
        """Flush, write the EOF marker, fsync, close, drop `.inprogress`."""
        if self._fd is None:
            return
        self.flush()
        _write_all(self._fd, EOF_MARKER_BYTES)
        self.offset += len(EOF_MARKER_BYTES)
        if self.sync_policy is not SyncPolicy.NEVER:
            os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        if self.in_progress:
            self._rename()

    def discard(self) -> None:
        """Abandon the file: close it and delete it if it is still `.inprogress`."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._buffer.clear()
        self._buffered = self._buffered_rows = 0
        if self.in_progress and os.path.exists(self.path):
            os.unlink(self.path)

    def __enter__(self) -> XlogWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self.in_progress:
            self.discard()
        else:
            self.close()

    def _rename(self) -> None:
        final = self.path[:-len(INPROGRESS_SUFFIX)]
        os.rename(self.path, final)
        self.path = final

    def _open_fd(self) -> int:
        """The file's descriptor; ValueError once closed."""
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        return self._fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# ---------------------------------------------------------------------------
# Reading.

class XlogReader:
    """Cursor over one file.

    After iteration stops, `eof_marker` tells whether the file was closed
    cleanly and `torn_tail` (a NeedMore) describes a partial block at its end.
    Iterating again continues from where it stopped, picking up bytes appended
    since (a relay following the current WAL file). With `force_recovery`
    corrupt blocks are recorded in `skipped` and reading resumes at the next
    block magic, as 2.6.0 does; otherwise they raise CorruptBlock.
    """

    def __init__(self, path: str, *, expected_type: str | None = None,
                 force_recovery: bool = False, chunk_size: int = 1 << 20,
                 with_rows: bool = True):
        self.path = path
        self.force_recovery = force_recovery
        self.eof_marker = False
        self.torn_tail: NeedMore | None = None
        self.skipped: list[XlogError] = []
        self._chunk = chunk_size
        self._pending: list[XRow] = []
        self._file = open(path, "rb")
        try:
            self.meta, self.header_size = self._read_header()
            if expected_type is not None and self.meta.filetype != expected_type:
                raise ClientError(ErrorCode.ER_INVALID_XLOG_TYPE, expected_type,
                                  self.meta.filetype)
        except BaseException:
            self._file.close()
            raise
        self._stream = BlockStream(self.header_size, with_rows=with_rows)
        self._stream.feed(self._head_rest)
        del self._head_rest

    def _read_header(self) -> tuple[XlogMeta, int]:
        data = b""
        while True:
            chunk = self._file.read(max(self._chunk, META_LEN_MAX + 2))
            data += chunk
            parsed = parse_meta(data)
            if parsed is not None:
                meta, size = parsed
                self._head_rest = data[size:]
                return meta, size
            if not chunk:
                raise XlogHeaderError(f"{self.path}: Unexpected end of file")

    @property
    def position(self) -> int:
        """File offset just after the last block returned (where good data ends)."""
        return self._stream.position

    def _read_more(self) -> bool:
        data = self._file.read(self._chunk)
        if not data:
            return False
        self._stream.feed(data)
        return True

    def blocks(self) -> Iterator[Block]:
        self.torn_tail = None
        while True:
            try:
                item = self._stream.next()
            except CorruptBlock as err:
                if not self.force_recovery:
                    raise
                self.skipped.append(err)
                while not self._stream.skip_corrupt():
                    if not self._read_more():
                        stream = self._stream
                        self._note_tail(NeedMore(stream.position, stream.buffered, MARKER_SIZE))
                        return
                continue
            if isinstance(item, Block):
                yield item
            elif isinstance(item, EofMarker):
                self.eof_marker = True
                if self._read_more():
                    self._stream.next()   # raises DataAfterEof
                return
            elif not self._read_more():
                self._note_tail(item)
                return

    def _note_tail(self, item: NeedMore) -> None:
        self.torn_tail = item if item.available else None

    def transactions(self) -> Iterator[list[XRow]]:
        """Rows grouped by transaction. A transaction never spans blocks in files
        2.6.0 writes; should one end unfinished in a closed file, its rows are
        still yielded (2.6.0 recovery applies rows one by one)."""
        for block in self.blocks():
            txs, self._pending = split_transactions(block.rows, self._pending)
            yield from txs
        if self.eof_marker and self._pending:
            rest, self._pending = self._pending, []
            yield rest

    def rows(self) -> Iterator[XRow]:
        for block in self.blocks():
            yield from block.rows

    def check_snapshot_complete(self) -> None:
        """A snapshot without EOF marker must never be trusted."""
        if not self.eof_marker:
            raise XlogError(f"snapshot `{self.path}' has no EOF marker")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> XlogReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
