"""File I/O for .xlog / .snap on top of the codec in `format`: the one writer and the
one reader of these files.

* `XlogWriter` creates `<20-digit signature>.<ext>.inprogress`, writes the
  header and blocks, and on close writes the EOF marker, fsyncs and drops the
  `.inprogress` suffix. As in 2.6.0, an `.xlog` is renamed right after its
  header is written (rows that reach the disk must be visible to recovery
  after a crash; a leftover `.xlog.inprogress` only means a crash during
  creation), while a `.snap` keeps the suffix until it is complete. The WAL
  (core/wal/wal_dir.py) and checkpoints (core/wal/checkpoint.py) write with it.
* `XlogReader` iterates blocks (with rows or raw), transactions or rows of one
  file, stops at the EOF marker, reports a torn tail, and can be resumed on a
  file that grows. Recovery, the relay's cursor, `spindle cat` and Spark's scan
  read with it.
* `list_files` finds a directory's files by signature, `read_meta` reads a header.
"""
from __future__ import annotations

import enum
import errno
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


def dir_rows(dirname: str, ext: str = ".xlog") -> list[XRow]:
    """Every row of the finished `ext` files of `dirname`, oldest file first."""
    rows: list[XRow] = []
    for entry in list_files(dirname, ext):
        with XlogReader(entry.path) as reader:
            rows.extend(reader.rows())
    return rows


def list_inprogress(dirname: str) -> list[str]:
    return sorted(os.path.join(dirname, name) for name in os.listdir(dirname)
                  if name.endswith(INPROGRESS_SUFFIX))


def remove_inprogress(dirname: str) -> list[str]:
    """Delete leftovers of interrupted writes, as 2.6.0 does at startup."""
    removed = list_inprogress(dirname)
    for path in removed:
        os.unlink(path)
    return removed


def read_header(path: str) -> tuple[XlogMeta, int]:
    """A file's header and its size (where the first block starts)."""
    with open(path, "rb") as f:
        head = f.read(META_LEN_MAX + 2)
    parsed = parse_meta(head)
    if parsed is None:
        raise XlogHeaderError(f"{path}: Unexpected end of file")
    return parsed


def read_meta(path: str) -> XlogMeta:
    return read_header(path)[0]


# ---------------------------------------------------------------------------
# Writing.

class SyncPolicy(str, enum.Enum):
    NEVER = "never"    # no fsync at all (tests, throwaway files)
    CLOSE = "close"    # fsync when closing: wal_mode = 'write', checkpoints
    WRITE = "write"    # fsync after every flush too


class XlogIO:
    """The system calls a writer makes, in one place so that the WAL (wal_dir.WalIO:
    it syncs data only) and tests (counting fsyncs, failing writes as a full disk
    does) can change them."""

    def open_new(self, path: str, exclusive: bool = True) -> int:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
        return os.open(path, flags, 0o644)

    def write(self, fd: int, data: bytes) -> None:
        written = os.write(fd, data)
        if written < len(data):         # a short write: the rest, piece by piece
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view):]

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)
        os.lseek(fd, size, os.SEEK_SET)

    def close(self, fd: int) -> None:
        os.close(fd)


_DEFAULT_IO = XlogIO()


class XlogWriter:
    """Appends blocks to one file: the WAL's xlogs and the checkpoints' snapshots.
    Not thread-safe; one owner (the WAL thread or tx in its place, or the snapshot
    thread) writes it.

    Two ways to add rows: `write_block(data)` writes encoded rows as one block now
    (the WAL's lone entry), `add_data`/`add_tx` buffer them and write a block once
    128 KiB are buffered, never inside a transaction (a WAL batch, a snapshot),
    `flush()` writing the rest. Nothing here syncs between blocks unless the policy
    is WRITE: the WAL calls `sync()` once per batch in 'fsync' mode."""

    def __init__(self, path: str, fd: int, meta: XlogMeta, offset: int, *,
                 header_size: int | None = None, sync: SyncPolicy | str = SyncPolicy.CLOSE,
                 compress: bool = True, io: XlogIO | None = None):
        self.path = path
        self.meta = meta
        self.offset = offset            # where the next block goes
        self.header_size = offset if header_size is None else header_size
        self.rows = 0
        self.sync_policy = SyncPolicy(sync)
        self.compress = compress
        self.io = io or _DEFAULT_IO
        self._fd: int | None = fd
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._buffered_rows = 0

    # -- creation -------------------------------------------------------------

    @classmethod
    def create(cls, dirname: str, meta: XlogMeta, *, sync: SyncPolicy | str = SyncPolicy.CLOSE,
               compress: bool = True, rename_on_close: bool | None = None,
               io: XlogIO | None = None, exclusive: bool = True) -> XlogWriter:
        """Create the file named by `meta`'s signature; never overwrites a finished
        one. `exclusive=False` reuses an `.inprogress` leftover (a checkpoint after
        a crash during the last one).

        `rename_on_close` defaults to True for .snap/.vylog and False for .xlog:
        an xlog is renamed right after its header, as 2.6.0 does, since rows that
        reach the disk must be visible to recovery after a crash."""
        if meta.vclock is None:
            raise ValueError("a new file needs a VClock in its header")
        if rename_on_close is None:
            rename_on_close = meta.filetype != XLOG
        io = io or _DEFAULT_IO
        final = os.path.join(dirname, format_filename(meta.signature, EXT_BY_TYPE[meta.filetype]))
        if os.path.exists(final):
            raise FileExistsError(errno.EEXIST, f"file '{final}' already exists", final)
        os.makedirs(dirname, exist_ok=True)
        path = final + INPROGRESS_SUFFIX
        fd = io.open_new(path, exclusive)
        header = meta.encode()
        try:
            io.write(fd, header)
            if not rename_on_close:
                os.rename(path, final)
                path = final
        except BaseException:
            io.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
            raise
        return cls(path, fd, meta, len(header), sync=sync, compress=compress, io=io)

    @classmethod
    def create_snapshot(cls, dirname: str, instance_uuid: str, vclock: VClock,
                        **kwargs) -> XlogWriter:
        return cls.create(dirname, XlogMeta(SNAP, instance_uuid, vclock.copy()), **kwargs)

    @classmethod
    def open_for_append(cls, path: str, *, valid_size: int | None = None,
                        sync: SyncPolicy | str = SyncPolicy.CLOSE, compress: bool = True,
                        io: XlogIO | None = None) -> XlogWriter:
        """Reopen a finished xlog to continue it: its EOF marker is cut off.

        `valid_size`, when given (the reader's position after the last good
        block), also cuts a torn tail, so new blocks never follow garbage.
        """
        meta, header_size = read_header(path)
        io = io or _DEFAULT_IO
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
            if valid_size is not None:
                size = min(size, valid_size)
            elif size >= MARKER_SIZE and os.pread(fd, MARKER_SIZE, size - MARKER_SIZE) \
                    == EOF_MARKER_BYTES:
                size -= MARKER_SIZE
            io.truncate(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, meta, size, header_size=header_size, sync=sync,
                   compress=compress, io=io)

    # -- writing --------------------------------------------------------------

    @property
    def in_progress(self) -> bool:
        return self.path.endswith(INPROGRESS_SUFFIX)

    @property
    def has_rows(self) -> bool:
        return self.offset > self.header_size

    @property
    def buffered_size(self) -> int:
        return self._buffered

    def write_block(self, data: bytes) -> int:
        """Write encoded rows as one block now; returns its size. On failure the
        file may end in part of it: the owner cuts it back (`truncate`)."""
        block = encode_block(data, compress=self.compress)
        self.io.write(self._fd, block)  # type: ignore[arg-type]   # (None once closed)
        self.offset += len(block)
        return len(block)

    def add_data(self, data: bytes, rows: int = 0) -> int:
        """Buffer the encoded rows of whole transactions; a block is written once
        the buffer (fixheader included) reaches 128 KiB. Returns the bytes written
        to the file now (0 if none)."""
        self._buffer.append(data)
        self._buffered += len(data)
        self._buffered_rows += rows
        if FIXHEADER_SIZE + self._buffered >= AUTOCOMMIT_THRESHOLD:
            return self.flush()
        return 0

    def add_tx(self, rows: Iterable[XRow]) -> int:
        """Buffer one whole transaction (add_data of its rows)."""
        rows = list(rows)
        return self.add_data(encode_rows(rows), len(rows))

    def add_row(self, row: XRow) -> int:
        """Buffer a row that is a transaction of its own (snapshot rows)."""
        return self.add_tx((row,))

    def write_tx(self, rows: Iterable[XRow]) -> int:
        """Write one transaction now, as one block (with anything buffered before)."""
        self.add_tx(rows)
        return self.flush()

    def flush(self) -> int:
        """Write the buffer as one block; returns its size in bytes. A failed
        write leaves the file ending at the last good block, as xlog_tx_write
        does, and the buffer as it was."""
        if not self._buffered:
            return 0
        fd = self._open_fd()
        start = self.offset
        buffer = self._buffer
        try:
            size = self.write_block(buffer[0] if len(buffer) == 1 else b"".join(buffer))
        except BaseException:
            try:
                self.io.truncate(fd, start)
                self.offset = start
            except OSError:
                pass      # the write's error is the one to report; the owner decides
            raise
        self.rows += self._buffered_rows
        buffer.clear()
        self._buffered = self._buffered_rows = 0
        if self.sync_policy is SyncPolicy.WRITE:
            self.io.fsync(fd)
        return size

    def truncate(self, size: int) -> None:
        """Cut the file back to `size` (a failed batch) and drop what is buffered."""
        self._buffer.clear()
        self._buffered = self._buffered_rows = 0
        self.io.truncate(self._open_fd(), size)
        self.offset = size

    def sync(self) -> None:
        self.io.fsync(self._open_fd())

    def close(self) -> None:
        """Flush, write the EOF marker, fsync (unless NEVER), close, drop
        `.inprogress`. The descriptor is closed even when this fails (and the
        file keeps its `.inprogress` name, if it had one)."""
        fd = self._fd
        if fd is None:
            return
        try:
            self.flush()
            self.io.write(fd, EOF_MARKER_BYTES)
            self.offset += MARKER_SIZE
            if self.sync_policy is not SyncPolicy.NEVER:
                self.io.fsync(fd)
        finally:
            self._fd = None
            self.io.close(fd)
        if self.in_progress:
            self._rename()

    def abandon(self) -> None:
        """Close the descriptor as it is, no EOF marker (a file whose tail could
        not be cut: nothing may be appended to it any more)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                self.io.close(fd)
            except OSError:
                pass

    def discard(self) -> None:
        """Abandon the file and delete it if it is still `.inprogress`."""
        self.abandon()
        self._buffer.clear()
        self._buffered = self._buffered_rows = 0
        if self.in_progress:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

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


# ---------------------------------------------------------------------------
# Reading.

class XlogReader:
    """Cursor over one file: the one reader of .xlog/.snap files (recovery, the
    WAL reopening its file, the relay's cursor, `spindle cat`, Spark's scan).

    Views: `blocks()` (decoded rows with each block, unless `with_rows=False`),
    `raw_blocks()` (payloads only, or where blocks are), `transactions()`, `rows()`.
    After iteration stops, `eof_marker` tells whether the file was closed
    cleanly and `torn_tail` (a NeedMore) describes a partial block at its end.
    Iterating again continues from where it stopped, picking up bytes appended
    since (a relay following the current WAL file). With `force_recovery`
    corrupt blocks are recorded in `skipped` and reading resumes at the next
    block magic, as 2.6.0 does; otherwise they raise CorruptBlock.

    `start` (a block's offset) and `end` bound what is read: bytes at or after
    `end` are never read, so a range ending at a block boundary ends there with
    no torn tail (Spark's splits of a file). `grow=False` takes the file's size
    at open as `end` when none is given: a file being written is read up to what
    it held then.
    """

    def __init__(self, path: str, *, expected_type: str | None = None,
                 force_recovery: bool = False, chunk_size: int = 1 << 20,
                 with_rows: bool = True, start: int | None = None,
                 end: int | None = None, grow: bool = True):
        self.path = path
        self.force_recovery = force_recovery
        self.eof_marker = False
        self.torn_tail: NeedMore | None = None
        self.skipped: list[XlogError] = []
        self._chunk = chunk_size
        self._pending: list[XRow] = []
        self._file = open(path, "rb")
        try:
            if end is None and not grow:
                end = os.fstat(self._file.fileno()).st_size
            self._end = end
            self.meta, self.header_size, head = self._read_header()
            if expected_type is not None and self.meta.filetype != expected_type:
                raise ClientError(ErrorCode.ER_INVALID_XLOG_TYPE, expected_type,
                                  self.meta.filetype)
            if start is None or start == self.header_size:
                if end is not None and len(head) > end:
                    head = head[:max(end, self.header_size)]
                # the blocks read with the header are decoded from that chunk as it is
                self._stream = BlockStream(0, with_rows=with_rows)
                self._stream.feed(head, skip=self.header_size)
            else:
                self._stream = BlockStream(start, with_rows=with_rows)
        except BaseException:
            self._file.close()
            raise

    def _read_header(self) -> tuple[XlogMeta, int, bytes]:
        """(header, its size, every byte read: the header and what follows it)."""
        data = b""
        while True:
            chunk = self._file.read(max(self._chunk, META_LEN_MAX + 2))
            data += chunk
            parsed = parse_meta(data)
            if parsed is not None:
                meta, size = parsed
                return meta, size, data
            if not chunk:
                raise XlogHeaderError(f"{self.path}: Unexpected end of file")

    @property
    def position(self) -> int:
        """File offset just after the last block returned (where good data ends)."""
        return self._stream.position

    def _read_more(self, needed: int = 0) -> bool:
        """Read the file again from where decoding stands, at least `needed` bytes
        (the block that did not fit) and up to a chunk: the bytes not decoded yet
        are read again with the new ones rather than joined to them, one copy less
        per chunk (they are in the page cache). False when nothing new came."""
        stream = self._stream
        at = stream.position
        want = max(self._chunk, needed)
        if self._end is not None:
            want = min(want, self._end - at)
        have = stream.buffered
        if want <= have:
            return False
        data = os.pread(self._file.fileno(), want, at)
        if len(data) <= have:
            return False
        stream.refill(data)
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
            elif not self._read_more(item.needed):
                self._note_tail(item)
                return

    def raw_blocks(self, *, check: bool = True, payload: bool = True) -> Iterator[Block]:
        """`blocks()` without their rows: each block's payload (`data`, decompressed),
        or with `payload=False` only where blocks are (`offset`, `size`; the data is
        b""). `check=False` skips the CRC (a pre-pass that only looks at them)."""
        stream = self._stream
        saved = stream.with_rows, stream.check, stream.payload
        stream.with_rows, stream.check, stream.payload = False, check, payload
        try:
            yield from self.blocks()
        finally:
            stream.with_rows, stream.check, stream.payload = saved

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
