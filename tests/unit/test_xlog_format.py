import ast
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spindle.core.iproto.constants import IprotoType, type_name
from spindle.core.iproto.request import encode_dml_body, encode_snapshot_body
from spindle.core.iproto.row_block import LocalTxRows, encode_local_tx, encode_row_list
from spindle.core.iproto.xrow import XRow, encode_header
from spindle.core.xlog.format import (
    COMPRESS_THRESHOLD, EOF_MARKER_BYTES, FIXHEADER_SIZE, ROW_MARKER, ZROW_MARKER, Block,
    BlockStream, CorruptBlock, DataAfterEof, EofMarker, NeedMore, XlogHeaderError, XlogMeta,
    crc32c, decode_block, decode_file, decode_fixheader, encode_block, encode_file,
    encode_fixheader, encode_rows, encode_tx, parse_meta, split_transactions, zstd_decompress,
)
from spindle.core.vclock import VClock
from spindle.core.replication.wire_tx import plain_tx

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
FILES = sorted(p for p in FIXTURES.glob("*/*") if p.suffix in (".xlog", ".snap"))
UUID1 = "11111111-1111-4111-8111-111111111111"
CAT_BODY_KEYS = {"space_id": 0x10, "index_id": 0x11, "index_base": 0x15, "key": 0x20,
                 "tuple": 0x21, "operations": 0x28}
DUMP_HEADER_KEYS = {"REQUEST_TYPE": "type", "REPLICA_ID": "replica_id", "LSN": "lsn",
                    "TIMESTAMP": "timestamp", "GROUP_ID": "group_id"}


def load_cat(path: Path) -> list[dict]:
    """Documents printed by `tarantoolctl cat --show-system` (YAML)."""
    text = "\n".join(line for line in path.read_text().splitlines()
                     if not line.startswith("Processing file"))
    return [doc for doc in yaml.safe_load_all(text) if doc]


def load_dump(path: Path) -> dict:
    """The independent block dump: meta, blocks with their rows, EOF offset."""
    dump = {"blocks": [], "eof": None}
    for line in path.read_text().splitlines():
        if line.startswith("META "):
            dump["meta"] = ast.literal_eval(line[5:]).encode()
        elif line.startswith("BLOCK "):
            m = re.match(r"BLOCK (\d+) at (\d+) magic=(\w+) \((\w+)\) len=(\d+) crc32p=(\d+) "
                         r"crc32c=(\w+) crc_ok=True padding=(\w+)", line)
            assert m, line
            dump["blocks"].append({
                "offset": int(m[2]), "magic": int(m[3], 16), "len": int(m[5]),
                "crc32c": int(m[7], 16), "padding": bytes.fromhex(m[8]),
                "head": [], "tail": [], "total": None})
        elif line.startswith("  ROW "):
            header, body = line[len("  ROW header="):].split(" body=", 1)
            block = dump["blocks"][-1]
            side = "tail" if block["total"] is not None else "head"
            block[side].append((ast.literal_eval(header), ast.literal_eval(body)))
        elif line.startswith("  ... ("):
            dump["blocks"][-1]["total"] = int(re.search(r"\((\d+) rows", line)[1])
        elif line.startswith("EOF marker"):
            dump["eof"], dump["size"] = map(int, re.findall(r"\d+", line))
    return dump


def check_row_against_dump(row: XRow, header: dict, body: dict):
    for key, attr in DUMP_HEADER_KEYS.items():
        assert getattr(row, attr) == header.get(key, 0), (key, row)
    if "TSN" in header:
        assert row.tsn == row.lsn - header["TSN"]
        assert row.is_commit == bool(header.get("FLAGS", 0) & 1)
    else:
        assert row.tsn == row.lsn and row.is_commit
    assert row.body_map() == body


def check_row_against_cat(row: XRow, doc: dict):
    head = doc["HEADER"]
    assert head.get("lsn", 0) == row.lsn
    assert head.get("replica_id", 0) == row.replica_id
    assert head.get("group_id", 0) == row.group_id
    assert head["type"] == (type_name(row.type) or row.type)
    assert abs(head.get("timestamp", 0) - row.timestamp) < 1e-4   # cat prints %.14g
    if "tsn" in head:
        assert (row.tsn, row.is_commit) == (head["tsn"], head.get("commit", False))
    else:
        assert row.tsn == row.lsn and row.is_commit
    body = doc["BODY"]
    if isinstance(body, list):   # cat shows a {2: x, 3: y} map as a Lua array
        expected = {i + 1: v for i, v in enumerate(body) if v is not None}
    else:
        expected = {CAT_BODY_KEYS[k]: v for k, v in body.items()}
    assert row.body_map() == expected


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_matches_tarantoolctl_cat(path):
    contents = decode_file(path.read_bytes())
    docs = load_cat(Path(str(path) + ".cat.txt"))
    assert len(contents.rows) == len(docs)
    for row, doc in zip(contents.rows, docs):
        check_row_against_cat(row, doc)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_matches_block_dump(path):
    data = path.read_bytes()
    contents = decode_file(data)
    dump = load_dump(Path(str(path) + ".blocks.txt"))
    assert data[:contents.header_size] == dump["meta"]
    assert contents.meta.encode() == dump["meta"]
    assert contents.eof_offset == dump["eof"] and dump["size"] == len(data)
    assert contents.torn_tail is None
    assert len(contents.blocks) == len(dump["blocks"])
    for block, expected in zip(contents.blocks, dump["blocks"]):
        assert block.offset == expected["offset"]
        assert block.fixheader.magic == expected["magic"]
        assert block.fixheader.length == expected["len"]
        assert block.fixheader.crc32c == expected["crc32c"]
        fixheader = data[block.offset:block.offset + FIXHEADER_SIZE]
        assert fixheader.endswith(expected["padding"])
        assert encode_fixheader(expected["magic"], expected["len"], expected["crc32c"]) \
            == fixheader
        rows = block.rows
        if expected["total"] is not None:
            assert len(rows) == expected["total"]
        else:
            assert len(rows) == len(expected["head"])
        for row, (header, body) in zip(rows, expected["head"]):
            check_row_against_dump(row, header, body)
        for row, (header, body) in zip(rows[len(rows) - len(expected["tail"]):],
                                       expected["tail"]):
            check_row_against_dump(row, header, body)


def test_fixture_meta_fields():
    contents = decode_file((FIXTURES / "master/00000000000000000026.xlog").read_bytes())
    meta = contents.meta
    assert (meta.filetype, meta.version, meta.server_version, meta.instance_uuid) == \
        ("XLOG", "0.13", "2.6.0-0-g47aa4e01e", UUID1)
    assert meta.vclock == VClock({1: 26}) and meta.prev_vclock == VClock({1: 25})
    assert meta.signature == 26
    assert contents.blocks == [] and contents.eof_offset == 122


@pytest.mark.parametrize("path", [p for p in FILES if p.suffix == ".xlog"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_xlog_fixture_reencodes_byte_exact(path):
    """Same rows -> same bytes: header, every block (incl. the 2-txn blocks of
    the replica's xlog), EOF marker."""
    data = path.read_bytes()
    contents = decode_file(data)
    again = contents.meta.encode() + b"".join(encode_block(encode_rows(b.rows))
                                              for b in contents.blocks) + EOF_MARKER_BYTES
    assert again == data


@pytest.mark.parametrize("path", [p for p in FILES if p.suffix == ".snap"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_snapshot_fixture_rows_reencode_byte_exact(path):
    """The zstd frame itself differs between libzstd builds, the rows do not."""
    contents = decode_file(path.read_bytes())
    [block] = contents.blocks
    assert block.compressed
    assert encode_rows(block.rows) == block.data
    for row in block.rows:
        body = row.body_map()
        assert encode_snapshot_body(body[0x10], body[0x21]) == row.body
    reencoded = encode_block(block.data)
    again = decode_block(reencoded)
    assert again.compressed and again.data == block.data


def test_replica_xlog_groups_transactions():
    contents = decode_file((FIXTURES / "replica/00000000000000000014.xlog").read_bytes())
    assert [len(b.rows) for b in contents.blocks] == [1, 1, 2, 4, 1]
    txs = contents.transactions()
    assert [[r.lsn for r in tx] for tx in txs] == [[15], [16], [17], [18], [19, 20, 21], [22],
                                                   [23]]
    assert contents.blocks[3].fixheader.length == 133


# -- header --------------------------------------------------------------------

def test_meta_encode_exact_forms():
    assert XlogMeta("XLOG", UUID1, VClock()).encode() == (
        b"XLOG\n0.13\nVersion: 2.6.0-0-g47aa4e01e\nInstance: " + UUID1.encode()
        + b"\nVClock: {}\n\n")
    assert len(XlogMeta("XLOG", UUID1, VClock()).encode()) == 97
    meta = XlogMeta("SNAP", UUID1, VClock({1: 25}), server_version=None)
    assert meta.encode() == b"SNAP\n0.13\nInstance: " + UUID1.encode() + b"\nVClock: {1: 25}\n\n"


def test_meta_parse_tolerance():
    text = (b"XLOG\n0.12\nServer: " + UUID1.upper().encode() + b"\nVClock:\t{ 1: 2 }\n"
            b"Custom: whatever\n\nrest")
    meta, end = parse_meta(text)
    assert meta.instance_uuid == UUID1 and meta.version == "0.12"
    assert meta.vclock == VClock({1: 2}) and meta.prev_vclock is None
    assert meta.unknown == {"Custom": "whatever"} and text[end:] == b"rest"
    assert parse_meta(b"XLOG\n0.13\nVClock: {}\n") is None


@pytest.mark.parametrize("text,message", [
    (b"XLOG\n0.11\n\n", "unsupported file format version 0.11"),
    (b"XLOG\n\n", "failed to parse xlog version string"),
    (b"TOOLONGTYPE\n0.13\n\n", "failed to parse xlog type string"),
    (b"XLOG\n0.13\nno colon\n\n", "can't extract meta value"),
    (b"XLOG\n0.13\nInstance: 1234\n\n", "can't parse instance UUID"),
    (b"XLOG\n0.13\nInstance: zzzzzzzz-1111-4111-8111-111111111111\n\n",
     "can't parse instance UUID"),
    (b"XLOG\n0.13\nVClock: {1: x}\n\n", "invalid vclock at offset 5"),
    (b"XLOG\n0.13\nVClock: {" + b"1: 1, " * 200 + b"}\n\n", "can't parse vclock"),
    (b"\xff\xfe\n0.13\n\n", None),
])
def test_meta_parse_errors(text, message):
    with pytest.raises(XlogHeaderError) as info:
        result = parse_meta(text)
        if result is not None and message is None:
            raise XlogHeaderError("parsed")  # junk type is still a header; checked by readers
    if message is not None:
        assert str(info.value) == message


def test_meta_without_end_is_refused_once_too_long():
    with pytest.raises(XlogHeaderError):
        parse_meta(b"XLOG\n0.13\n" + b"x" * 5000)


# -- blocks --------------------------------------------------------------------

def test_crc_is_tarantools_variant():
    assert crc32c(b"") == 0
    data = (FIXTURES / "master/00000000000000000000.xlog").read_bytes()
    assert crc32c(data[97 + 19:97 + 19 + 76]) == 0x573B621A
    assert crc32c(data[97 + 39:97 + 95], crc32c(data[97 + 19:97 + 39])) == 0x573B621A


@given(st.binary(max_size=300), st.integers(0, 0xFFFFFFFF))
def test_crc_extension_loaded_directly_is_the_packages_function(data, start):
    """format.py loads crc32c's C function without the package's __init__ (start-up
    time); it must be the very function the package exports."""
    import crc32c as package

    from spindle.core.xlog import format as xlog_format
    assert xlog_format._crc32c_inverted(data, start) == package.crc32c(data, start)
    assert crc32c(data, start) == (~package.crc32c(data, start ^ 0xFFFFFFFF)) & 0xFFFFFFFF


@pytest.mark.parametrize("length,crc,expected", [
    (76, 0x573B621A, "d5ba0bab4c00ce573b621aa700000000000000"),
    (133, 0xFFB250F5, "d5ba0babcc8500ceffb250f5a6000000000000"),
    (5, 7, "d5ba0bab050007ab" + "00" * 11),
    (70000, 0x1234, "d5ba0babce0001117000cd1234a5" + "00" * 5),
])
def test_fixheader_encoding(length, crc, expected):
    head = encode_fixheader(ROW_MARKER, length, crc)
    assert head.hex() == expected and len(head) == FIXHEADER_SIZE
    assert decode_fixheader(head).length == length


def reference_fixheader(magic: int, length: int, crc: int, crc32p: int = 0) -> bytes:
    """The fixheader field by field: magic, three shortest MsgPack uints, padding."""
    import msgpack
    head = magic.to_bytes(4, "big") + b"".join(
        msgpack.packb(value) for value in (length, crc32p, crc))
    padding = FIXHEADER_SIZE - len(head)
    return head + (bytes((0xA0 | (padding - 1),)) + bytes(padding - 1) if padding else b"")


@pytest.mark.parametrize("length", [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000,
                                    0xFFFFFFFF, 1 << 32, (1 << 63) - 1])
@pytest.mark.parametrize("crc", [0, 0x7F, 0xFFFF, 0xFFFFFF, 0x1000000, 0xDEADBEEF,
                                 0xFFFFFFFF])
def test_fixheader_fast_path_matches_the_field_by_field_form(length, crc):
    for magic in (ROW_MARKER, ZROW_MARKER):
        for crc32p in (0, 5):
            assert encode_fixheader(magic, length, crc, crc32p) == \
                reference_fixheader(magic, length, crc, crc32p)
    # twice: the second comes from the per-length cache
    assert encode_fixheader(ROW_MARKER, length, crc) == reference_fixheader(
        ROW_MARKER, length, crc)


@pytest.mark.parametrize("size", [0, 1, 40, 0x7F, 0x80, COMPRESS_THRESHOLD - FIXHEADER_SIZE - 1,
                                  COMPRESS_THRESHOLD - FIXHEADER_SIZE, 70000])
def test_small_block_fast_path_matches_the_general_form(size):
    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    expected = reference_fixheader(ROW_MARKER, size, crc32c(data)) + data
    for compress in (False, True):
        if compress and size + FIXHEADER_SIZE >= COMPRESS_THRESHOLD:
            continue
        for form in (data, bytearray(data), memoryview(data)):
            block = encode_block(form, compress=compress)
            assert type(block) is bytes and block == expected
            assert decode_fixheader(block).crc32c == crc32c(data)


@pytest.mark.parametrize("head,reason", [
    (b"\xd5\xba\x0b\xac" + bytes(15), "invalid magic: 0xd5ba0bac"),
    (b"\xd5\xba\x0b\xab\xa0" + bytes(14), "broken fixheader length"),
    (b"\xd5\xba\x0b\xab\x05\xc0" + bytes(13), "broken fixheader crc32p"),
    (b"\xd5\xba\x0b\xab\x05\x00\xd0" + bytes(12), "broken fixheader crc32c"),
    (b"\xd5\xba\x0b\xab\x05\x00\x07\xa6" + bytes(11), "broken fixheader padding"),
    (b"\xd5\xba\x0b\xab\xce\x80\x00\x00\x01\x00\x07" + b"\xa7" + bytes(7),
     "too large fixheader length"),
])
def test_fixheader_errors(head, reason):
    with pytest.raises(CorruptBlock) as info:
        decode_fixheader(head, base_offset=100)
    assert info.value.reason == reason and info.value.offset == 100


def test_fixheader_accepts_any_padding_value():
    head = b"\xd5\xba\x0b\xab\xcd\x00\x05\x00\x07" + b"\x99" + bytes(9)   # array of 9 zeros
    assert decode_fixheader(head).length == 5
    head = b"\xd5\xba\x0b\xab" + b"\xcf" + bytes(7) + b"\x05\x00\xce\x00\x00\x00\x07"
    assert len(head) == 19 and decode_fixheader(head).crc32c == 7


_UINT_FORMS = st.one_of(
    st.integers(0, 0x7F).map(lambda v: bytes((v,))),
    st.integers(0, 0xFF).map(lambda v: b"\xcc" + v.to_bytes(1, "big")),
    st.integers(0, 0xFFFF).map(lambda v: b"\xcd" + v.to_bytes(2, "big")),
    st.integers(0, 0xFFFFFFFF).map(lambda v: b"\xce" + v.to_bytes(4, "big")),
    st.integers(0, 2**64 - 1).map(lambda v: b"\xcf" + v.to_bytes(8, "big")),
    st.binary(min_size=1, max_size=3))          # not a uint at all


@settings(max_examples=400, deadline=None)
@given(magic=st.sampled_from([b"\xd5\xba\x0b\xab", b"\xd5\xba\x0b\xba", b"\xd5\xba\x0b\xbb"]),
       fields=st.lists(_UINT_FORMS, min_size=3, max_size=3),
       padding=st.one_of(st.just(b"str"), st.binary(max_size=15)))
def test_the_usual_fixheader_fast_path_decides_as_the_field_by_field_rules(
        magic, fields, padding):
    from spindle.core.xlog import format as xlog_format

    head = magic + b"".join(fields)
    rest = FIXHEADER_SIZE - len(head)
    if padding == b"str" and rest > 0:
        head += bytes((0xA0 | (rest - 1),)) + bytes(rest - 1)
    else:
        head = (head + padding + bytes(FIXHEADER_SIZE))[:FIXHEADER_SIZE]

    def decided(fast: bool):
        original = xlog_format._usual_fixheader
        if not fast:
            xlog_format._usual_fixheader = lambda head: None
        try:
            return decode_fixheader(head, base_offset=7)
        except CorruptBlock as exc:
            return ("CorruptBlock", exc.offset, exc.reason)
        finally:
            xlog_format._usual_fixheader = original
    assert decided(True) == decided(False)


def rows_of_size(total: int, first_lsn: int = 1) -> list[XRow]:
    """One transaction of at least `total` encoded bytes (multi-statement if needed)."""
    rows, size, lsn = [], 0, first_lsn
    while size < total:
        row = XRow(type=IprotoType.INSERT, replica_id=1, lsn=lsn, timestamp=1.5,
                   body=encode_dml_body(IprotoType.INSERT, 512, tuple=[lsn, "x" * 50]))
        rows.append(row)
        size += len(row.encode())
        lsn += 1
    if len(rows) > 1:
        for row in rows:
            row.tsn, row.is_commit = first_lsn, False
        rows[-1].is_commit = True
    return rows


def test_compression_threshold_includes_fixheader():
    payload = b"\x81\x00\x00" * COMPRESS_THRESHOLD
    small = payload[:COMPRESS_THRESHOLD - FIXHEADER_SIZE - 1]
    exact = payload[:COMPRESS_THRESHOLD - FIXHEADER_SIZE]
    assert encode_block(small)[:4] == ROW_MARKER.to_bytes(4, "big")
    assert encode_block(exact)[:4] == ZROW_MARKER.to_bytes(4, "big")
    assert encode_block(exact, compress=False)[:4] == ROW_MARKER.to_bytes(4, "big")


def test_encode_tx_round_trip_plain_and_zstd():
    for total in (100, 5000, 200_000):
        rows = rows_of_size(total)
        raw = encode_tx(rows)
        block = decode_block(raw, base_offset=7)
        assert isinstance(block, Block) and block.size == len(raw) and block.offset == 7
        assert block.compressed == (len(encode_rows(rows)) + FIXHEADER_SIZE >= COMPRESS_THRESHOLD)
        assert block.rows == rows


def test_decode_block_outcomes():
    raw = encode_tx(rows_of_size(300))
    for cut in (0, 3, 4, 18, 19, len(raw) - 1):
        result = decode_block(raw[:cut], base_offset=50)
        assert isinstance(result, NeedMore)
        assert result.offset == 50 and result.available == cut
    assert decode_block(raw[:10]).needed == FIXHEADER_SIZE
    assert decode_block(raw[:30]).needed == len(raw)
    assert decode_block(EOF_MARKER_BYTES + b"x", base_offset=9) == EofMarker(9)
    flipped = bytearray(raw)
    flipped[40] ^= 0x01
    with pytest.raises(CorruptBlock) as info:
        decode_block(bytes(flipped), base_offset=1000)
    assert info.value.reason == "tx checksum mismatch" and info.value.offset == 1000
    # garbage magic is corrupt only once a whole fixheader is there
    assert isinstance(decode_block(b"garbage"), NeedMore)
    with pytest.raises(CorruptBlock):
        decode_block(b"garbage" * 3)


def test_undecodable_row_with_good_crc_is_corrupt():
    good = XRow(type=2, lsn=1, body=b"\x80").encode()
    payload = good + b"\x81\x53\xc0"
    raw = encode_fixheader(ROW_MARKER, len(payload), crc32c(payload)) + payload
    with pytest.raises(CorruptBlock) as info:
        decode_block(raw, base_offset=5)
    assert info.value.reason == "can't parse row" and info.value.row_offset == len(good)


def test_bad_zstd_with_good_crc_is_corrupt():
    payload = b"\x28\xb5\x2f\xfd\x00\x00garbage"
    raw = encode_fixheader(ZROW_MARKER, len(payload), crc32c(payload)) + payload
    with pytest.raises(CorruptBlock) as info:
        decode_block(raw)
    assert info.value.reason.startswith("can't decompress block")
    frame = encode_block(encode_rows(rows_of_size(5000)))[FIXHEADER_SIZE:]
    with pytest.raises(ValueError):
        zstd_decompress(frame[:-5])


def test_block_stream_byte_by_byte():
    data = (FIXTURES / "replica/00000000000000000014.xlog").read_bytes()
    meta, pos = parse_meta(data)
    stream = BlockStream(pos)
    blocks = []
    for i in range(pos, len(data)):
        stream.feed(data[i:i + 1])
        result = stream.next()
        if isinstance(result, Block):
            blocks.append(result)
        elif isinstance(result, NeedMore):
            assert result.offset == stream.position
    assert isinstance(stream.next(), EofMarker)
    assert [r.lsn for b in blocks for r in b.rows] == list(range(15, 24))
    stream.feed(b"\x00")
    with pytest.raises(DataAfterEof) as info:
        stream.next()
    assert info.value.offset == 479


def test_block_stream_skips_corrupt_block():
    txs = [rows_of_size(100 * i) for i in range(1, 4)]
    blocks = [encode_tx(tx) for tx in txs]
    damaged = bytearray(blocks[1])
    damaged[25] ^= 0xFF
    stream = BlockStream()
    stream.feed(blocks[0] + bytes(damaged) + blocks[2] + EOF_MARKER_BYTES)
    assert stream.next().rows == txs[0]
    with pytest.raises(CorruptBlock) as info:
        stream.next()
    assert info.value.offset == len(blocks[0])
    assert stream.skip_corrupt()
    assert stream.next().rows == txs[2]
    assert isinstance(stream.next(), EofMarker)


def test_split_transactions_carries_open_tx():
    rows = [XRow(type=2, lsn=i, tsn=1, is_commit=i == 3) for i in (1, 2, 3)]
    txs, rest = split_transactions(rows[:2])
    assert txs == [] and rest == rows[:2]
    txs, rest = split_transactions(rows[2:], rest)
    assert txs == [rows] and rest == []


def test_decode_file_reports_missing_eof_and_torn_tail():
    meta = XlogMeta("XLOG", UUID1, VClock({1: 5}))
    txs = [rows_of_size(100), rows_of_size(3000, first_lsn=10)]
    image = encode_file(meta, txs)
    assert decode_file(image).eof_offset == len(image) - 4
    no_eof = decode_file(image[:-4])
    assert no_eof.eof_offset is None and no_eof.torn_tail is None
    assert len(no_eof.transactions()) == 2
    torn = decode_file(image[:-10])
    assert torn.eof_offset is None and len(torn.blocks) == 1
    assert torn.torn_tail.offset == torn.blocks[0].offset + torn.blocks[0].size
    with pytest.raises(DataAfterEof):
        decode_file(image + b"\x00")
    with pytest.raises(XlogHeaderError):
        decode_file(image[:40])


# -- damage: random truncation and byte flips ------------------------------------

IMAGE_META = XlogMeta("XLOG", UUID1, VClock({1: 100}), prev_vclock=VClock({1: 50}))
IMAGE_TXS = [rows_of_size(n, first_lsn=100 * i + 1)
             for i, n in enumerate((50, 400, 3000, 100, 2500))]
IMAGE = encode_file(IMAGE_META, IMAGE_TXS)
IMAGE_CONTENTS = decode_file(IMAGE)
BLOCK_SPANS = [(b.offset, b.offset + b.size) for b in IMAGE_CONTENTS.blocks]


def classify(data: bytes):
    try:
        contents = decode_file(data)
    except XlogHeaderError:
        return "header", None
    except CorruptBlock as err:
        return "corrupt", err
    except DataAfterEof as err:
        return "after-eof", err
    if contents.torn_tail is not None:
        return "torn", contents
    return ("clean" if contents.eof_offset is not None else "unclosed"), contents


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(IMAGE) - 1))
def test_random_truncation(cut):
    outcome, info = classify(IMAGE[:cut])
    header_size = IMAGE_CONTENTS.header_size
    if cut < header_size:
        assert outcome == "header"
        return
    complete = [span for span in BLOCK_SPANS if span[1] <= cut]
    if cut == header_size or any(span[1] == cut for span in BLOCK_SPANS):
        assert outcome == "unclosed"
    else:
        assert outcome == "torn"
        start = complete[-1][1] if complete else header_size
        assert info.torn_tail.offset == start and info.torn_tail.available == cut - start
    assert len(info.blocks) == len(complete)
    assert info.rows == [r for tx in IMAGE_TXS[:len(complete)] for r in tx]


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(IMAGE) - 1), st.integers(1, 255))
def test_random_byte_flip(where, mask):
    data = bytearray(IMAGE)
    data[where] ^= mask
    outcome, info = classify(bytes(data))
    header_size = IMAGE_CONTENTS.header_size
    if where < header_size:
        # a damaged header is refused, or changes only what readers ignore, or
        # (a broken blank line) moves the end of the header: never a crash
        assert outcome in ("header", "clean", "corrupt", "torn", "unclosed", "after-eof")
    elif where >= len(IMAGE) - 4:
        # a damaged EOF marker looks like the start of a block cut short
        assert outcome == "torn" and info.torn_tail.available == 4
    else:
        start, end = next(span for span in BLOCK_SPANS if span[0] <= where < span[1])
        if where >= start + FIXHEADER_SIZE:
            # every payload byte is covered by the CRC
            assert outcome == "corrupt" and info.offset == start
            assert info.reason == "tx checksum mismatch"
        elif where < start + 4:
            assert outcome == "corrupt" and info.offset == start
        else:
            # len/crc fields: wrong length (a cut-short block when it points past
            # the end), mismatch, broken fixheader; crc32p and padding contents
            # are not checked by 2.6.0 either
            assert outcome in ("corrupt", "torn", "clean")
            if outcome == "corrupt":
                assert info.offset == start
    if outcome == "clean" and where >= header_size:
        assert info.rows == IMAGE_CONTENTS.rows


# ------------------------------------------------------- the row encoder's runs

# every size class of a MsgPack uint, and the edges between them
UINTS = st.one_of(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000,
                                   0xFFFFFFFF, 0x100000000, 2**64 - 1]),
                  st.integers(0, 2**64 - 1))


@st.composite
def row_runs(draw) -> list[XRow]:
    """Rows as a journal entry (or several in a row) hands them to the encoder:
    mostly sharing type, replica id and TIMESTAMP, with any field able to differ,
    some of them relayed rows that keep the bytes they came in (XRow.wire)."""
    rtype = draw(st.sampled_from([IprotoType.INSERT, IprotoType.REPLACE, IprotoType.NOP,
                                  0x7F, 0x80, 0x1F]))
    replica_id = draw(st.sampled_from([0, 1, 31, 0x7F, 0x80]))
    timestamp = draw(st.sampled_from([0.0, 1.5, 1700000000.25]))
    rows = []
    for _ in range(draw(st.integers(1, 12))):
        change = draw(st.integers(0, 7))     # which field, if any, differs from here
        if change == 1:
            rtype = draw(st.sampled_from([IprotoType.INSERT, IprotoType.DELETE, 0x80]))
        elif change == 2:
            replica_id = draw(st.sampled_from([0, 2, 0x7F, 0x80, 300]))
        elif change == 3:
            timestamp = draw(st.sampled_from([0.0, 2.5, float("nan"), -1.0]))
        lsn = draw(UINTS)
        tsn = draw(st.one_of(st.just(0), st.just(lsn), UINTS))
        row = XRow(int(rtype), draw(st.sampled_from([None, b"\x81\x10\x01"])),
                   replica_id, lsn, timestamp, draw(st.sampled_from([0, 0, 0, 1])), tsn,
                   draw(st.booleans()))
        if (draw(st.booleans()) and row.body and timestamp and not row.group_id
                and 0 <= row.type < 0x80 and 0 < replica_id < 0x80 and lsn):
            # as the replica's decoder keeps it: the relay's bytes, another TIMESTAMP
            sent = XRow(row.type, row.body, replica_id, lsn, 99.5, 0, tsn, row.is_commit)
            row.wire = encode_header(sent, 0) + row.body
        rows.append(row)
    return rows


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(row_runs())
def test_rows_encoded_in_runs_are_what_the_general_encoder_writes(rows):
    """encode_row_list puts together once what consecutive rows share: each row's
    bytes are still exactly its header as xrow_header_encode writes it (no SYNC),
    then its body."""
    assert encode_row_list(rows) == [encode_header(row, 0) + (row.body or b"")
                                     for row in rows]


@st.composite
def local_transactions(draw) -> tuple[list[XRow], bool]:
    """A transaction as the WAL signs it (assign_lsn) after any LSN of any size,
    with its rows' types mostly shared, and whether it was signed as the usual
    local transaction."""
    from spindle.core.wal.journal import assign_lsn
    instance_id = draw(st.sampled_from([1, 2, 31]))
    before = draw(st.one_of(
        st.sampled_from([0, 0x7E, 0xFE, 0xFFFE, 0xFFFFFFFE]),
        st.integers(0, 0x10000).map(lambda n: 0xFFFF - n if n % 2 else 0xFFFFFFFF - n),
        st.integers(0, 2**63)))
    rtype = draw(st.sampled_from([IprotoType.INSERT, IprotoType.REPLACE, 0x7F, 0x80]))
    rows = []
    for _ in range(draw(st.one_of(st.just(1), st.integers(1, 200)))):
        if draw(st.integers(0, 20)) == 0:
            rtype = draw(st.sampled_from([IprotoType.DELETE, 0x80]))
        rows.append(XRow(int(rtype), draw(st.sampled_from([None, b"\x81\x10\x01"]))))
    vclock = VClock({instance_id: before} if before else {})
    local = assign_lsn(rows, vclock, instance_id, draw(st.sampled_from([1.5, 1e9 + 0.25])))
    return rows, local


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(local_transactions())
def test_a_local_transaction_encodes_as_the_general_encoder_writes_it(tx):
    """encode_local_tx builds each header from the transaction's shared parts: the
    bytes are still each row's header as xrow_header_encode writes it, then its
    body, whatever the LSNs' sizes and the types."""
    rows, local = tx
    assert local                          # every transaction here is the usual one
    expected = [encode_header(row, 0) + (row.body or b"") for row in rows]
    assert encode_row_list(rows) == expected
    encoded = encode_local_tx(rows)
    assert encoded == expected
    # the WAL tail takes a LocalTxRows answer as plain without looking at the rows
    if type(encoded) is LocalTxRows:
        assert plain_tx(rows)


def test_local_tx_rows_mark_the_shared_header_only():
    """encode_local_tx answers LocalTxRows where it wrote the shared header of
    several rows, a plain list for one row and where it fell back on
    encode_row_list."""
    from spindle.core.wal.journal import assign_lsn

    def signed(types, before):
        rows = [XRow(t, b"\x81\x10\x01") for t in types]
        assert assign_lsn(rows, VClock({1: before}), 1, 1.5)
        return rows
    assert type(encode_local_tx(signed([2] * 3, 70000))) is LocalTxRows
    assert type(encode_local_tx(signed([2], 70000))) is list          # one row
    assert type(encode_local_tx(signed([2, 3], 70000))) is list       # two types
    assert type(encode_local_tx(signed([2] * 3, 10))) is list         # LSNs below 256


@given(st.integers(0, 1 << 31), st.integers(0, 0xFFFFFFFF), st.integers(0, 18),
       st.integers(0, 255))
def test_the_row_fixheader_lookup_agrees_with_the_general_rules(length, crc, at, byte):
    """format._row_fixheader (a lookup for writers' usual uncompressed fixheaders)
    answers as _usual_fixheader, or leaves the header to it (None)."""
    from spindle.core.xlog.format import (
        ROW_MARKER, Fixheader, _row_fixheader, _usual_fixheader,
    )
    from spindle.core.iproto.constants import IPROTO_BODY_LEN_MAX
    head = bytearray(encode_fixheader(ROW_MARKER, length, crc))
    if crc >= 0x1000000 and length <= IPROTO_BODY_LEN_MAX:      # the usual one: looked up
        assert _row_fixheader(bytes(head)) == Fixheader(ROW_MARKER, length, 0, crc)
    for candidate in (bytes(head), bytes(head[:at]) + bytes((byte,)) + bytes(head[at + 1:])):
        fast = _row_fixheader(candidate)
        if fast is not None:
            assert fast == _usual_fixheader(candidate)
