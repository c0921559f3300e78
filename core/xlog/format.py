""".xlog / .snap format 0.13 as a codec: bytes <-> header, blocks, rows. No I/O.

Layout (reference/xlog.md): a text header ending with an empty line, then
blocks, then the 4-byte EOF marker. A block is a 19-byte fixheader (magic, len,
crc32p, crc32c, MsgPack padding) and a payload of back-to-back rows, stored
plain or as one zstd frame.

Outcomes of decoding, which recovery must tell apart:
* `NeedMore`: the buffer ends inside a block (or inside the fixheader). While a
  file is still growing this means "wait"; at the end of a file it is a *torn
  tail*, which 2.6.0 silently treats as the end of data.
* `CorruptBlock`: a complete block is wrong (bad magic, broken fixheader, CRC
  mismatch, bad zstd, undecodable row). Fatal in 2.6.0 unless force_recovery.
* `DataAfterEof`: bytes follow the EOF marker.
* `XlogHeaderError`: the text header is unusable.

`BlockStream` is the one decoding loop: files/XlogReader feeds it what it reads
(every reader of files goes through that), `decode_file` a whole image.
"""
from __future__ import annotations

import re
import struct
import threading
import uuid as uuid_module
from collections.abc import Iterable
from dataclasses import dataclass, field

import zstandard

from spindle.core.iproto.constants import IPROTO_BODY_LEN_MAX, XLOG_FIXHEADER_SIZE
from spindle.core.iproto.errors import BoxError, ClientError
from spindle.core.iproto.msgpack import MsgpackError, mp_encode_uint, mp_next
from spindle.core.iproto.row_block import decode_rows, encode_row_list
from spindle.core.iproto.xrow import XRow
from spindle.core.vclock import VCLOCK_STR_LEN_MAX, VClock, VClockParseError

ROW_MARKER = 0xD5BA0BAB
ZROW_MARKER = 0xD5BA0BBA
EOF_MARKER = 0xD510ADED
ROW_MARKER_BYTES = struct.pack(">I", ROW_MARKER)
ZROW_MARKER_BYTES = struct.pack(">I", ZROW_MARKER)
EOF_MARKER_BYTES = struct.pack(">I", EOF_MARKER)
MARKER_SIZE = 4
FIXHEADER_SIZE = XLOG_FIXHEADER_SIZE

# 2.6.0 compresses a block when its buffer, fixheader included, reaches 2 KiB.
COMPRESS_THRESHOLD = 2 * 1024
# Buffered rows are flushed as a block once the buffer reaches 128 KiB (at a
# transaction boundary for the WAL).
AUTOCOMMIT_THRESHOLD = 128 * 1024
ZSTD_LEVEL = 3

FORMAT_VERSION = "0.13"
ACCEPTED_VERSIONS = ("0.12", "0.13")
# What 2.6.0 writes after "Version: "; readers ignore it, so we keep the
# oracle's string and our files stay indistinguishable from its files.
WRITER_VERSION = "2.6.0-0-g47aa4e01e"
META_LEN_MAX = 1024 + VCLOCK_STR_LEN_MAX
_FILETYPE_LEN_MAX = 9           # char filetype[10] in struct xlog_meta
_UUID_STR_LEN = 36

XLOG = "XLOG"
SNAP = "SNAP"
VYLOG = "VYLOG"


# ---------------------------------------------------------------------------
# Errors.

class XlogError(BoxError):
    """Tarantool's XlogError: the file is not what it should be."""

    type = "XlogError"

    def __init__(self, message: str):
        super().__init__(message)


class XlogHeaderError(XlogError):
    """The text header (meta) cannot be parsed."""


class CorruptBlock(XlogError):
    """A complete block at `offset` is damaged; `reason` is 2.6.0's wording."""

    def __init__(self, offset: int, reason: str, *, row_offset: int | None = None):
        where = f"at offset {offset}"
        if row_offset is not None:
            where += f" (row at payload offset {row_offset})"
        super().__init__(f"{reason} {where}")
        self.offset = offset
        self.reason = reason
        self.row_offset = row_offset


class DataAfterEof(XlogError):
    def __init__(self, offset: int):
        super().__init__(f"has some data after eof marker at {offset}")
        self.offset = offset


# ---------------------------------------------------------------------------
# Checksum and compression.

def _load_crc32c():
    """The crc32c package's C function. Loaded from its extension module directly:
    the package's __init__ looks its own version up in the installed metadata
    (importlib.metadata, the email parser: ~8 ms of every start)."""
    from importlib.machinery import PathFinder
    package = PathFinder.find_spec("crc32c")
    if package is not None and package.submodule_search_locations:
        spec = PathFinder.find_spec("crc32c._crc32c", package.submodule_search_locations)
        if spec is not None and spec.loader is not None:
            module = spec.loader.create_module(spec)
            if module is not None:   # (None: the loader leaves it to the import system)
                spec.loader.exec_module(module)
                return module.crc32c
    import crc32c   # pragma: no cover - another layout of the package
    return crc32c.crc32c


_crc32c_inverted = _load_crc32c()


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """Tarantool's crc32_calc(): CRC-32C with no initial or final inversion.

    The crc32c package computes the standard (inverted) variant; feeding it the
    inverted register and inverting the result cancels both inversions.
    """
    return (~_crc32c_inverted(data, crc ^ 0xFFFFFFFF)) & 0xFFFFFFFF


_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    # Compressor objects must not be shared between threads (WAL vs snapshot).
    comp = getattr(_local, "compressor", None)
    if comp is None:
        comp = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False,
                                        write_checksum=False, write_dict_id=False)
        _local.compressor = comp
    return comp


def zstd_compress(data: bytes) -> bytes:
    """One zstd frame without content size, as 2.6.0's streaming writer makes."""
    cobj = _compressor().compressobj()
    return cobj.compress(data) + cobj.flush()


def zstd_decompress(data: bytes) -> bytes:
    """Decompress every frame in `data`; a cut or bad frame raises ValueError.

    A block is one whole frame: that is decompressed with a context kept per
    thread (making one per block costs a fifth of the decompression); anything
    else (several frames, a cut or damaged one) goes the general way below,
    which gives its answer or error."""
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstandard.ZstdDecompressor()
    dobj = dctx.decompressobj()
    try:
        whole = dobj.decompress(data)
    except zstandard.ZstdError:
        pass
    else:
        if dobj.eof and not dobj.unused_data:
            return whole
    return _zstd_decompress_frames(data)


def _zstd_decompress_frames(data: bytes) -> bytes:
    out = []
    remaining = bytes(data)
    while remaining:
        dobj = zstandard.ZstdDecompressor().decompressobj()
        try:
            out.append(dobj.decompress(remaining))
        except zstandard.ZstdError as exc:
            raise ValueError(str(exc)) from exc
        if not dobj.eof:
            raise ValueError("truncated zstd frame")
        remaining = dobj.unused_data
    return b"".join(out)


# ---------------------------------------------------------------------------
# Text header.

@dataclass
class XlogMeta:
    """The text header. `vclock`/`prev_vclock` None means the line is absent."""

    filetype: str
    instance_uuid: str
    vclock: VClock | None = None
    prev_vclock: VClock | None = None
    version: str = FORMAT_VERSION
    server_version: str | None = WRITER_VERSION
    unknown: dict[str, str] = field(default_factory=dict)

    @property
    def signature(self) -> int:
        """The number in the file name: sum of the VClock (0 when absent)."""
        return self.vclock.signature if self.vclock is not None else 0

    def encode(self) -> bytes:
        """The header as xlog_meta_format() prints it (always format 0.13)."""
        lines = [self.filetype, FORMAT_VERSION]
        if self.server_version is not None:
            lines.append(f"Version: {self.server_version}")
        lines.append(f"Instance: {self.instance_uuid}")
        if self.vclock is not None:
            lines.append(f"VClock: {self.vclock}")
        if self.prev_vclock is not None:
            lines.append(f"PrevVClock: {self.prev_vclock}")
        return ("\n".join(lines) + "\n\n").encode("ascii")


def encode_meta(meta: XlogMeta) -> bytes:
    return meta.encode()


def _parse_vclock(value: str) -> VClock:
    if len(value) > VCLOCK_STR_LEN_MAX:
        raise XlogHeaderError("can't parse vclock")
    try:
        return VClock.from_string(value)
    except VClockParseError as exc:
        raise XlogHeaderError(f"invalid vclock at offset {exc.offset}") from exc


def parse_meta(buf: bytes | bytearray, pos: int = 0) -> tuple[XlogMeta, int] | None:
    """Parse the text header at `pos`: (meta, position of the first block), or
    None when the closing empty line is not in `buf` yet."""
    end = bytes(buf[pos:pos + META_LEN_MAX + 2]).find(b"\n\n")
    if end < 0:
        if len(buf) - pos > META_LEN_MAX + 1:
            raise XlogHeaderError("failed to find the end of the file header")
        return None
    # latin-1 maps every byte to a character, so junk cannot raise here.
    text = bytes(buf[pos:pos + end + 1]).decode("latin-1")
    lines = text.split("\n")[:-1]
    if len(lines) < 2:
        raise XlogHeaderError("failed to parse xlog version string" if lines
                              else "failed to parse xlog type string")
    filetype, version = lines[0], lines[1]
    if len(filetype) > _FILETYPE_LEN_MAX:
        raise XlogHeaderError("failed to parse xlog type string")
    if version not in ACCEPTED_VERSIONS:
        raise XlogHeaderError(f"unsupported file format version {version}")
    meta = XlogMeta(filetype=filetype, instance_uuid="", version=version, server_version=None)
    for line in lines[2:]:
        key, colon, value = line.partition(":")
        if not colon:
            raise XlogHeaderError("can't extract meta value")
        value = value.lstrip(" \t")
        if key in ("Instance", "Server"):
            meta.instance_uuid = _parse_uuid(value)
        elif key == "VClock":
            meta.vclock = _parse_vclock(value)
        elif key == "PrevVClock":
            meta.prev_vclock = _parse_vclock(value)
        elif key == "Version":
            meta.server_version = value
        else:
            meta.unknown[key] = value
    return meta, pos + end + 2


def _parse_uuid(value: str) -> str:
    if len(value) != _UUID_STR_LEN:
        raise XlogHeaderError("can't parse instance UUID")
    try:
        return str(uuid_module.UUID(value))
    except ValueError as exc:
        raise XlogHeaderError("can't parse instance UUID") from exc


# ---------------------------------------------------------------------------
# Blocks.

@dataclass(frozen=True, slots=True)
class Fixheader:
    magic: int
    length: int
    crc32p: int
    crc32c: int

    @property
    def compressed(self) -> bool:
        return self.magic == ZROW_MARKER


def encode_fixheader(magic: int, length: int, crc: int, crc32p: int = 0) -> bytes:
    """19 bytes: magic, shortest uints, then a MsgPack str of zero bytes as padding."""
    if magic == ROW_MARKER and crc32p == 0 and 0x1000000 <= crc <= 0xFFFFFFFF:
        head, padding = _row_fixheader_parts(length)
        return head + _pack_crc32(0xCE, crc) + padding
    head = _MAGIC_BYTES.get(magic) or struct.pack(">I", magic)
    head += mp_encode_uint(length) + mp_encode_uint(crc32p) + mp_encode_uint(crc)
    missing = FIXHEADER_SIZE - len(head)
    if missing > 0:
        head += _PADDING[missing]
    assert len(head) == FIXHEADER_SIZE
    return head


def _row_fixheader_parts(length: int) -> tuple[bytes, bytes]:
    """An uncompressed block's fixheader around the usual crc32c (a 5-byte uint
    0xCE xx xx xx xx, 255 times in 256): what goes before it, the padding after it.
    A WAL writes one per block, and its blocks are of a few lengths: cached."""
    parts = _ROW_FIXHEADER_PARTS.get(length)
    if parts is None:
        head = ROW_MARKER_BYTES + mp_encode_uint(length) + b"\x00"
        parts = (head, _PADDING.get(FIXHEADER_SIZE - len(head) - 5, b""))
        if len(_ROW_FIXHEADER_PARTS) < 4096:
            _ROW_FIXHEADER_PARTS[length] = parts
    return parts


_MAGIC_BYTES = {ROW_MARKER: ROW_MARKER_BYTES, ZROW_MARKER: ZROW_MARKER_BYTES}
# padding of n bytes: a str header for n - 1 zero bytes
_PADDING = {n: bytes((0xA0 | (n - 1),)) + bytes(n - 1) for n in range(1, FIXHEADER_SIZE)}
_ROW_FIXHEADER_PARTS: dict[int, tuple[bytes, bytes]] = {}
_pack_crc32 = struct.Struct(">BI").pack


@dataclass(frozen=True, slots=True)
class NeedMore:
    """The buffer ends inside the block starting at `offset`: `available` bytes
    of it are present, at least `needed` are required. At the end of a file
    this is a torn tail."""

    offset: int
    available: int
    needed: int


@dataclass(frozen=True, slots=True)
class EofMarker:
    offset: int

    @property
    def consumed(self) -> int:
        return MARKER_SIZE


@dataclass(slots=True)
class Block:
    """One decoded block: `rows` of `size` bytes starting at file `offset`."""

    offset: int
    size: int
    fixheader: Fixheader
    data: bytes
    rows: list[XRow]

    @property
    def consumed(self) -> int:
        return self.size

    @property
    def compressed(self) -> bool:
        return self.fixheader.compressed


# A fixheader as writers make it: a magic, three MsgPack uints, then nothing or a str
# (zero bytes) as padding. Checked in one match; any other form (or anything wrong)
# goes through decode_fixheader's field-by-field rules and their errors.
_UINT_FIELD = rb"([\x00-\x7f]|\xcc.|\xcd..|\xce....|\xcf.{8})"
_USUAL_FIXHEADER = re.compile(
    rb"(" + re.escape(ROW_MARKER_BYTES) + rb"|" + re.escape(ZROW_MARKER_BYTES) + rb")"
    + _UINT_FIELD * 3 + rb"([\xa0-\xbf])?", re.S)


def _uint_field(encoded: bytes) -> int:
    return encoded[0] if len(encoded) == 1 else int.from_bytes(encoded[1:], "big")


def _usual_fixheader(head: bytes) -> Fixheader | None:
    """The fixheader `head` (19 bytes) in the usual form, else None."""
    match = _USUAL_FIXHEADER.match(head)
    if match is None:
        return None
    magic, length, crc32p, crc32c, padding = match.groups()
    if padding is None:
        if match.end() != FIXHEADER_SIZE:
            return None
    elif padding[0] & 0x1F != FIXHEADER_SIZE - match.end():
        return None
    length = _uint_field(length)
    if length > IPROTO_BODY_LEN_MAX:
        return None
    return Fixheader(ROW_MARKER if magic == ROW_MARKER_BYTES else ZROW_MARKER, length,
                     _uint_field(crc32p), _uint_field(crc32c))


def _row_fixheader(head: bytes) -> Fixheader | None:
    """The fixheader `head` (19 bytes) of an uncompressed block as writers make it
    (encode_fixheader's cached parts: magic, length, crc32p 0, a 5-byte crc32c,
    zeros as padding), else None. Its bytes before the crc32c name the length and
    are looked up: a file of one-transaction blocks (a WAL of autocommits) has a
    few lengths, and this is most of what a reader pays per block."""
    size = _ROW_HEAD_SIZE[head[4]]
    if not size or head[size] != 0xCE or head[size + 5:] != _ROW_PADDING[size]:
        return None
    key = head[:size]
    length = _ROW_HEADS.get(key)
    if length is None:
        if key[:MARKER_SIZE] != ROW_MARKER_BYTES or key[-1] != 0:
            return None
        length = _uint_field(key[MARKER_SIZE:-1])
        if length > IPROTO_BODY_LEN_MAX:
            return None
        if len(_ROW_HEADS) < 4096:
            _ROW_HEADS[key] = length
    return Fixheader(ROW_MARKER, length, 0, int.from_bytes(head[size + 1:size + 5], "big"))


# the size of an uncompressed block's fixheader up to its crc32c, by the first byte
# of its length (a fixint, 0xCC, 0xCD or 0xCE uint; 0: another form), and the
# padding that follows the crc32c then
_ROW_HEAD_SIZE = [MARKER_SIZE + 2 if b < 0x80 else {0xCC: 7, 0xCD: 8, 0xCE: 10}.get(b, 0)
                  for b in range(256)]
_ROW_PADDING = {size: _PADDING[FIXHEADER_SIZE - size - 5] for size in (6, 7, 8, 10)}
_ROW_HEADS: dict[bytes, int] = {}


def decode_fixheader(buf: bytes | bytearray, pos: int = 0, *,
                     base_offset: int = 0) -> Fixheader | NeedMore:
    """Decode the fixheader at `pos` with xlog_fixheader_decode()'s rules.

    Fewer than 19 bytes is NeedMore whatever they are: a crash can leave any
    prefix of a block at the end of a file.
    """
    offset = base_offset + pos
    available = len(buf) - pos
    if available < FIXHEADER_SIZE:
        return NeedMore(offset, available, FIXHEADER_SIZE)
    head = bytes(buf[pos:pos + FIXHEADER_SIZE])
    fast = _row_fixheader(head) or _usual_fixheader(head)
    if fast is not None:
        return fast
    magic = struct.unpack_from(">I", head)[0]
    if magic not in (ROW_MARKER, ZROW_MARKER):
        raise CorruptBlock(offset, f"invalid magic: 0x{magic:08x}")
    values = []
    p = MARKER_SIZE
    for name in ("length", "crc32p", "crc32c"):
        if p >= FIXHEADER_SIZE or not (head[p] < 0x80 or 0xCC <= head[p] <= 0xCF):
            raise CorruptBlock(offset, f"broken fixheader {name}")
        try:
            nxt = mp_next(head, p, FIXHEADER_SIZE)
        except MsgpackError:
            raise CorruptBlock(offset, f"broken fixheader {name}") from None
        values.append(int.from_bytes(head[p + 1:nxt], "big") if head[p] >= 0x80 else head[p])
        p = nxt
    if values[0] > IPROTO_BODY_LEN_MAX:
        raise CorruptBlock(offset, "too large fixheader length")
    if p < FIXHEADER_SIZE:
        try:
            if mp_next(head, p, FIXHEADER_SIZE) != FIXHEADER_SIZE:
                raise MsgpackError("padding does not end the fixheader")
        except MsgpackError:
            raise CorruptBlock(offset, "broken fixheader padding") from None
    return Fixheader(magic, values[0], values[1], values[2])



def decode_block(buf: bytes | bytearray, pos: int = 0, *, base_offset: int = 0,
                 with_rows: bool = True, check: bool = True,
                 payload: bool = True) -> Block | NeedMore | EofMarker:
    """Decode the block (or EOF marker) at `pos`.

    `base_offset` is the file offset of `buf[0]`, so errors and results carry
    file offsets. Returns NeedMore when the block is not complete in `buf`.
    `check=False` skips the CRC and `payload=False` the payload (the block's
    data is then b"", its rows []): a reader that only wants where blocks are
    (Spark's planner) pays for the fixheaders alone.
    """
    offset = base_offset + pos
    available = len(buf) - pos
    if available < MARKER_SIZE:
        return NeedMore(offset, available, MARKER_SIZE)
    if buf[pos:pos + MARKER_SIZE] == EOF_MARKER_BYTES:
        return EofMarker(offset)
    fixheader = decode_fixheader(buf, pos, base_offset=base_offset)
    if isinstance(fixheader, NeedMore):
        return fixheader
    size = FIXHEADER_SIZE + fixheader.length
    if available < size:
        return NeedMore(offset, available, size)
    if not payload:
        return Block(offset, size, fixheader, b"", [])
    stored = buf[pos + FIXHEADER_SIZE:pos + size]
    if type(stored) is not bytes:     # (a slice of bytes is bytes: no second copy)
        stored = bytes(stored)
    if check and crc32c(stored) != fixheader.crc32c:
        raise CorruptBlock(offset, "tx checksum mismatch")
    if fixheader.compressed:
        try:
            data = zstd_decompress(stored)
        except ValueError as exc:
            raise CorruptBlock(offset, f"can't decompress block: {exc}") from exc
    else:
        data = stored
    rows = decode_block_rows(offset, data) if with_rows else []
    return Block(offset, size, fixheader, data, rows)


def decode_block_rows(offset: int, data: bytes) -> list[XRow]:
    """The rows of the payload `data` of the block at file `offset`; an undecodable
    row is CorruptBlock "can't parse row" (what decode_block raises). For blocks
    read without their rows (`with_rows=False`) and decoded later."""
    try:
        return decode_rows(data)
    except ClientError as exc:
        raise CorruptBlock(offset, "can't parse row",
                           row_offset=getattr(exc, "offset", None)) from exc


def encode_block(data: bytes, *, compress: bool = True) -> bytes:
    """Wrap encoded rows into a block; zstd when the 2.6.0 threshold is reached."""
    size = len(data)
    if size < COMPRESS_THRESHOLD - FIXHEADER_SIZE and type(data) is bytes:
        # the usual small WAL block, as below with the crc computed in line and,
        # for a block length seen before, encode_fixheader's cached parts used here
        crc = ~_crc32c_inverted(data, 0xFFFFFFFF) & 0xFFFFFFFF
        parts = _ROW_FIXHEADER_PARTS.get(size)
        if parts is not None and crc >= 0x1000000:
            return parts[0] + _pack_crc32(0xCE, crc) + parts[1] + data
        return encode_fixheader(ROW_MARKER, size, crc) + data
    if compress and FIXHEADER_SIZE + size >= COMPRESS_THRESHOLD:
        stored, magic = zstd_compress(data), ZROW_MARKER
    else:
        stored, magic = bytes(data), ROW_MARKER
    if len(stored) > IPROTO_BODY_LEN_MAX:
        raise ValueError(f"block payload of {len(stored)} bytes exceeds 2 GiB")
    return encode_fixheader(magic, len(stored), crc32c(stored)) + stored


def encode_rows(rows: Iterable[XRow]) -> bytes:
    """Rows as they sit in a payload: SYNC is never written to disk."""
    return b"".join(encode_row_list(rows))


def encode_tx(rows: Iterable[XRow], *, compress: bool = True) -> bytes:
    """One block holding one transaction."""
    return encode_block(encode_rows(rows), compress=compress)


def encode_eof() -> bytes:
    return EOF_MARKER_BYTES


def find_next_magic(buf: bytes | bytearray, pos: int) -> int | None:
    """Position of the next block magic strictly after `pos` (force_recovery scan)."""
    plain = buf.find(ROW_MARKER_BYTES, pos + 1)
    zstd = buf.find(ZROW_MARKER_BYTES, pos + 1)
    found = [p for p in (plain, zstd) if p >= 0]
    return min(found) if found else None


def split_transactions(rows: Iterable[XRow], pending: list[XRow] | None = None,
                       ) -> tuple[list[list[XRow]], list[XRow]]:
    """Group rows into transactions: a row with is_commit ends one.

    Returns (complete transactions, rows of a transaction still open); pass the
    latter back as `pending` with the next rows.
    """
    txs: list[list[XRow]] = []
    current = list(pending or ())
    for row in rows:
        current.append(row)
        if row.is_commit:
            txs.append(current)
            current = []
    return txs, current


class BlockStream:
    """Incremental decoder: feed bytes as they arrive, take blocks out.

    `next()` returns a Block, an EofMarker (repeatedly, once reached) or NeedMore.
    It raises CorruptBlock / DataAfterEof. With `skip_corrupt()` a caller running
    with force_recovery moves on to the next magic, as 2.6.0 does.
    """

    def __init__(self, base_offset: int = 0, *, with_rows: bool = True):
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._base = base_offset
        # how blocks are decoded (decode_block's flags); a reader may change
        # them between blocks (XlogReader.raw_blocks)
        self.with_rows = with_rows
        self.check = True
        self.payload = True
        self.eof: EofMarker | None = None

    @property
    def position(self) -> int:
        """File offset of the first byte not yet consumed."""
        return self._base + self._pos

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def feed(self, data: bytes, skip: int = 0) -> None:
        """Add bytes read after those fed before. `skip` (only with nothing left
        to decode): the first bytes of `data` are not blocks (a reader's header,
        read in the same chunk as the first blocks) and are passed over."""
        buf = self._buf
        if self._pos >= len(buf):
            # All consumed (the usual case between whole chunks of a file): the
            # new bytes become the buffer as they are, no copy.
            self._base += self._pos
            self._buf, self._pos = data, min(skip, len(data))
            return
        assert not skip, "skip is for a stream with nothing left to decode"
        # A block cut by the end of the last chunk: its start joins the new bytes.
        self._base += self._pos
        self._buf, self._pos = bytes(buf[self._pos:]) + data, 0

    def refill(self, data: bytes) -> None:
        """Replace the bytes not decoded yet by `data`, which starts with them (the
        file read again from `position`) and goes on past them."""
        self._base += self._pos
        self._buf, self._pos = data, 0

    def next(self) -> Block | NeedMore | EofMarker:
        if self.eof is not None:
            if self.buffered:
                raise DataAfterEof(self.eof.offset)
            return self.eof
        result = decode_block(self._buf, self._pos, base_offset=self._base,
                              with_rows=self.with_rows, check=self.check,
                              payload=self.payload)
        if isinstance(result, Block):
            self._pos += result.size
        elif isinstance(result, EofMarker):
            self._pos += MARKER_SIZE
            self.eof = result
            if self.buffered:
                raise DataAfterEof(result.offset)
        return result

    def skip_corrupt(self) -> bool:
        """Drop bytes up to the next magic; False if none is buffered yet (the
        last 3 bytes are kept, they may be the start of one)."""
        nxt = find_next_magic(self._buf, self._pos)
        if nxt is None:
            self._pos = max(self._pos, len(self._buf) - (MARKER_SIZE - 1))
            return False
        self._pos = nxt
        return True


# ---------------------------------------------------------------------------
# Whole files in memory.

@dataclass
class XlogContents:
    meta: XlogMeta
    header_size: int
    blocks: list[Block]
    eof_offset: int | None
    torn_tail: NeedMore | None

    @property
    def rows(self) -> list[XRow]:
        return [row for block in self.blocks for row in block.rows]

    def transactions(self) -> list[list[XRow]]:
        txs, rest = split_transactions(self.rows)
        return txs + ([rest] if rest else [])


def decode_file(data: bytes, *, with_rows: bool = True) -> XlogContents:
    """Decode a complete file image (tests, tools) with BlockStream, as readers do.
    Raises XlogHeaderError, CorruptBlock or DataAfterEof; a missing EOF marker and a
    torn tail are reported, not raised."""
    parsed = parse_meta(data)
    if parsed is None:
        raise XlogHeaderError("Unexpected end of file")
    meta, pos = parsed
    stream = BlockStream(0, with_rows=with_rows)
    stream.feed(data, skip=pos)
    blocks: list[Block] = []
    while True:
        item = stream.next()
        if isinstance(item, Block):
            blocks.append(item)
        elif isinstance(item, EofMarker):
            return XlogContents(meta, pos, blocks, item.offset, None)
        else:
            torn = item if item.available else None
            return XlogContents(meta, pos, blocks, None, torn)


def encode_file(meta: XlogMeta, transactions: Iterable[Iterable[XRow]], *,
                compress: bool = True, eof: bool = True) -> bytes:
    """A file image with one block per transaction (tests, tools)."""
    parts = [meta.encode()]
    parts.extend(encode_tx(tx, compress=compress) for tx in transactions)
    if eof:
        parts.append(EOF_MARKER_BYTES)
    return b"".join(parts)
