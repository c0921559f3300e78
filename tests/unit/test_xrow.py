import struct
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spindle.core.iproto.constants import IPROTO_KEY_TYPE, IprotoKey, IprotoType, MpType
from spindle.core.iproto.errors import ClientError
from spindle.core.iproto.msgpack import MsgpackRaw, mp_next, pack, unpack
from spindle.core.iproto.request import (
    DmlRequest, decode_dml_body, decode_synchro_body, encode_dml_body, encode_snapshot_body,
    encode_synchro_body, synchro_row,
)
from spindle.core.iproto.row_block import decode_rows
from spindle.core.iproto.xrow import (
    XRow, decode_frame_length, decode_row, encode_reply_header, frame,
)

WIRE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6" / "wire"
GREETING_SIZE = 128


def split_frames(stream: bytes):
    pos = 0
    while pos < len(stream):
        length, size = decode_frame_length(stream, pos)
        yield stream[pos:pos + size + length]
        pos += size + length


def capture_frames():
    for path in sorted(WIRE.glob("*/conn*-*.bin")):
        data = path.read_bytes()
        if path.name.endswith("s2c.bin"):
            data = data[GREETING_SIZE:]
        for raw in split_frames(data):
            yield path.parent.name + "/" + path.name, raw


CAPTURED = list(capture_frames())


def test_captures_are_present():
    assert len(CAPTURED) > 1000


def test_every_captured_frame_reencodes_byte_exact():
    """Both header layouts seen on the wire round-trip: the fixed-width reply
    header and the compact xrow header used by relay, applier and the WAL."""
    reply_headers = xrow_headers = 0
    for name, raw in CAPTURED:
        length, size = decode_frame_length(raw)
        row, end = decode_row(raw, size, size + length, exact=True)
        assert end == len(raw)
        if raw[size:size + 3] == b"\x83\x00\xce":
            reply_headers += 1
            again = frame(encode_reply_header(row.type, row.sync, row.schema_version)
                          + (row.body or b""))
        else:
            xrow_headers += 1
            again = row.encode_frame()
        assert again == raw, (name, raw.hex())
    assert reply_headers >= 6 and xrow_headers >= 1000


def test_decode_captured_replicated_rows():
    rows = [decode_row(raw, 5, exact=True)[0] for _, raw in CAPTURED
            if raw[5:8] == b"\x86\x00\x04"]  # the 6-key UPDATE ending the 3-row txn
    assert rows
    row = rows[0]
    assert (row.type, row.replica_id, row.lsn, row.tsn, row.is_commit) == (4, 1, 21, 19, True)


def test_heartbeat_layout():
    row = XRow(type=IprotoType.OK, replica_id=1, timestamp=1795308837.6723127)
    assert row.encode_frame().hex() == "ce0000000f83000002010" + "4cb41dac08f496b072c"


def test_sync_in_header_order():
    row = XRow(type=IprotoType.INSERT, replica_id=3, group_id=1, lsn=7, sync=9,
               body=b"\x80")
    assert row.encode() == bytes.fromhex("85 00 02 01 09 02 03 07 01 03 07 80".replace(" ", ""))
    assert row.encode(sync=0)[:3] == b"\x84\x00\x02"
    decoded = decode_row(row.encode())[0]
    assert decoded.tsn == 7  # like Tarantool, a single statement's tsn is its lsn
    assert decoded == row    # ...which encodes exactly like "tsn not set"


def test_schema_version_is_not_part_of_xrow_header():
    row = XRow(type=IprotoType.OK, schema_version=82)
    assert row.encode() == b"\x81\x00\x00"


def test_multi_statement_transaction_header_fields():
    first = XRow(type=2, replica_id=1, lsn=19, tsn=19, is_commit=False, body=b"\x80")
    middle = XRow(type=2, replica_id=1, lsn=20, tsn=19, is_commit=False, body=b"\x80")
    last = XRow(type=2, replica_id=1, lsn=21, tsn=19, is_commit=True, body=b"\x80")
    single = XRow(type=2, replica_id=1, lsn=22, body=b"\x80")
    assert first.encode().hex() == "84000202010313080080"
    assert middle.encode().hex() == "84000202010314080180"
    assert last.encode().hex() == "8500020201031508020901" + "80"
    assert single.encode().hex() == "830002020103" + "1680"
    decoded = [decode_row(r.encode())[0] for r in (first, middle, last, single)]
    assert [(r.tsn, r.is_commit) for r in decoded] == [(19, False), (19, False), (19, True),
                                                      (22, True)]
    assert decoded[:3] == [first, middle, last]


def test_nop_row_has_no_body_even_if_bytes_follow():
    rows = decode_rows(XRow(type=IprotoType.NOP, replica_id=1, lsn=5).encode()
                       + XRow(type=2, lsn=6, body=b"\x80").encode())
    assert [r.type for r in rows] == [12, 2]
    assert rows[0].body is None and rows[1].body == b"\x80"
    with pytest.raises(ClientError):
        decode_row(b"\x81\x00\x0c\x80", exact=True)


def test_row_without_body_at_end():
    row, end = decode_row(b"\x81\x00\x00")
    assert row.body is None and end == 3


def test_unknown_but_typed_header_keys_are_skipped():
    # key 0x06 (uint), 0x21 (array), 0x30 (nil) pass 2.6.0's type table
    raw = b"\x84\x00\x02\x06\x05\x21\x92\x01\x02\x30\xc0" + b"\x80"
    row, end = decode_row(raw, exact=True)
    assert row.type == 2 and row.body == b"\x80"


@pytest.mark.parametrize("raw", [
    b"",                       # nothing
    b"\x91\x00",               # not a map
    b"\x81\xa1x\x00",          # string key
    b"\x81\x53\xc0",           # key 0x53 (IPROTO_TERM) is past 2.6.0's table
    b"\x81\x00\xd0\x02",       # int8 type: MP_INT, not MP_UINT
    b"\x81\x04\xca\x00\x00\x00\x00",  # float32 timestamp
    b"\x81\x04\x01",           # uint timestamp
    b"\x81\x30\x01",           # 0x30 must be nil
    b"\x81\x21\x01",           # 0x21 must be an array
    b"\x82\x00\x02",           # map says 2 entries, 1 present
    b"\x81\x00\xcd\x00",       # truncated uint
    b"\x81\x21\x92\x01",       # truncated array
])
def test_bad_header_is_invalid_msgpack(raw):
    with pytest.raises(ClientError) as info:
        decode_row(raw)
    assert info.value.code == 20
    assert str(info.value) == "Invalid MsgPack - packet header"


@pytest.mark.parametrize("raw", [
    b"\x81\x00\x02\xc1",             # never-valid byte
    b"\x81\x00\x02\x92\x01",         # truncated body
    b"\x81\x00\x02\x80\x80",         # two bodies where one is allowed
])
def test_bad_body_is_invalid_msgpack(raw):
    with pytest.raises(ClientError) as info:
        decode_row(raw, exact=True)
    assert info.value.code == 20
    assert str(info.value) == "Invalid MsgPack - packet body"


def test_decode_rows_reports_offset_of_bad_row():
    good = XRow(type=2, lsn=1, body=b"\x80").encode()
    with pytest.raises(ClientError) as info:
        decode_rows(good + b"\x81\x53\xc0")
    assert info.value.offset == len(good)


def test_frame_length():
    assert decode_frame_length(b"") is None
    assert decode_frame_length(b"\xce\x00\x00") is None
    assert decode_frame_length(b"\x05") == (5, 1)
    assert decode_frame_length(b"\xcd\x01\x00") == (256, 3)
    with pytest.raises(ClientError) as info:
        decode_frame_length(b"\x81")
    assert str(info.value) == "Invalid MsgPack - packet length"


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_garbage_never_raises_anything_but_client_error(data):
    for exact in (False, True):
        try:
            decode_row(data, exact=exact)
        except ClientError as err:
            assert err.code == 20
    try:
        decode_rows(data)
    except ClientError as err:
        assert err.code == 20


values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=40) | st.binary(max_size=40),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.integers(0, 100) | st.text(max_size=5), children, max_size=5),
    max_leaves=20)


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(0, 31),
       st.integers(0, 2**63), st.floats(allow_nan=False, allow_infinity=False),
       st.integers(0, 1), st.integers(0, 5), st.booleans(), st.lists(values, max_size=4))
def test_row_round_trip(rtype, sync, replica_id, lsn, tm, group_id, tsn_back, commit, body):
    tsn = max(lsn - tsn_back, 0)
    if tsn == 0 or (tsn == lsn and commit):
        commit = True
    row = XRow(type=rtype, sync=sync, replica_id=replica_id, lsn=lsn, timestamp=tm,
               group_id=group_id, tsn=tsn, is_commit=commit,
               body=None if rtype == IprotoType.NOP else pack(body))
    decoded, end = decode_row(row.encode(), exact=True)
    assert decoded == row
    if row.body is not None:
        assert decoded.body_map() == unpack(pack(body))


def test_mp_next_matches_msgpack():
    samples = [None, True, 1, -1, 2**40, -2**40, 1.5, "x" * 40, "y" * 300, b"z" * 70000,
               [1, [2, [3]]], {1: {2: "a"}}, msgpack.ExtType(1, b"abc"), list(range(70000))]
    for value in samples:
        raw = pack(value)
        assert mp_next(raw + b"\x00", 0) == len(raw)


# -- bodies -------------------------------------------------------------------

FIXTURE_BODIES = [
    # (type, encode kwargs, body bytes taken from master/00000000000000000000.xlog)
    (IprotoType.UPDATE, dict(space_id=512, index_base=1, key=[1], ops=[["=", 2, "aa"]]),
     "8410cd02001501209101219193a13d02a26161"),
    (IprotoType.UPSERT, dict(space_id=512, index_base=1, tuple=[3, "c"], ops=[["=", 2, "cc"]]),
     "8410cd02001501289193a13d02a2636321920" + "3a163"),
    (IprotoType.DELETE, dict(space_id=512, key=[2]), "8210cd0200209102"),
    (IprotoType.REPLACE, dict(space_id=512, tuple=[2, "bb"]), "8210cd0200219202a26262"),
]


@pytest.mark.parametrize("rtype,kwargs,hexbody", FIXTURE_BODIES)
def test_dml_body_matches_tarantool_layout(rtype, kwargs, hexbody):
    body = encode_dml_body(rtype, **kwargs)
    assert body.hex() == hexbody
    request = decode_dml_body(body, rtype)
    assert request.encode() == body
    assert request.space_id == kwargs["space_id"]
    assert request.ops == kwargs.get("ops")
    if rtype == IprotoType.UPDATE:
        assert request.tuple is None


def test_snapshot_body_uses_u32_space_id():
    body = encode_snapshot_body(272, ["max_id", 513])
    assert body.hex() == "8210ce00000110219" + "2a66d61785f6964cd0201"
    assert encode_dml_body(2, 272, tuple=["max_id", 513], space_id_u32=True) == body
    assert encode_snapshot_body(272, MsgpackRaw(pack(["max_id", 513]))) == body


def test_dml_missing_field():
    with pytest.raises(ClientError) as info:
        decode_dml_body(pack({0x10: 512}), IprotoType.INSERT)
    assert info.value.code == 69
    assert str(info.value) == "Missing mandatory field 'tuple' in request"
    with pytest.raises(ClientError) as info:
        decode_dml_body(None, IprotoType.DELETE)
    assert str(info.value) == "Missing mandatory field 'space id' in request"
    with pytest.raises(ClientError) as info:
        decode_dml_body(pack({0x10: 1, 0x21: [1]}), IprotoType.UPSERT)
    assert str(info.value) == "Missing mandatory field 'operations' in request"


@pytest.mark.parametrize("body", [
    {0x10: "x", 0x21: []}, {0x10: -1, 0x21: []}, {0x10: 1, 0x21: 5}, {0x10: 1, 0x21: [], 0x2a: 1},
    [1, 2],
])
def test_dml_type_errors(body):
    with pytest.raises(ClientError) as info:
        decode_dml_body(pack(body), IprotoType.INSERT)
    assert info.value.code == 20


def test_dml_unknown_keys_are_kept_aside():
    request = decode_dml_body(pack({0x10: 1, 0x21: [1], 0x50: "x", "k": 1}), IprotoType.INSERT)
    assert request.tuple == [1] and request.extra == {0x50: "x", "k": 1}


def test_select_body():
    request = decode_dml_body(pack({0x10: 5, 0x11: 1, 0x12: 10, 0x13: 2, 0x14: 5, 0x20: [1]}),
                              IprotoType.SELECT)
    assert (request.space_id, request.index_id, request.limit, request.offset,
            request.iterator, request.key) == (5, 1, 10, 2, 5, [1])


def test_synchro_bodies():
    assert encode_synchro_body(1, 22).hex() == "8202010316"
    assert decode_synchro_body(bytes.fromhex("8202010316")) == (1, 22, 0)
    assert decode_synchro_body(pack({"x": 1, 2: 3, 3: 70000, 9: [1]})) == (3, 70000, 0)
    # a PROMOTE of 2.6.3 (raft.md §5.5): its writer's term under IPROTO_TERM
    assert decode_synchro_body(pack({2: 1, 3: 25, 0x53: 6})) == (1, 25, 6)
    row = synchro_row(IprotoType.ROLLBACK, 1, 24, replica_id=1, lsn=25)
    assert row.encode().hex() == "8300290201031982020103" + "18"
    for bad in (None, pack([1]), pack({2: "a", 3: 1}), b"\xc1"):
        with pytest.raises(ClientError):
            decode_synchro_body(bad)
    with pytest.raises(ValueError):
        synchro_row(IprotoType.INSERT, 1, 1)


def test_non_utf8_strings_survive():
    raw = b"\x92\xa2\xff\xfe\x01"
    assert pack(unpack(raw)) == raw


def test_map_with_array_keys_decodes():
    raw = b"\x81\x92\x01\x02\x03"
    assert unpack(raw) == {(1, 2): 3}


def test_key_type_table_facts():
    assert IPROTO_KEY_TYPE[IprotoKey.TIMESTAMP] is MpType.DOUBLE
    assert IPROTO_KEY_TYPE[IprotoKey.VCLOCK] is MpType.MAP
    assert IPROTO_KEY_TYPE[0x2C] is MpType.NIL and IPROTO_KEY_TYPE[0x52] is MpType.NIL
    assert len(IPROTO_KEY_TYPE) == 0x53


def test_dml_request_dataclass_defaults():
    request = DmlRequest(type=IprotoType.INSERT, space_id=600, tuple=[1])
    assert request.encode() == encode_dml_body(2, 600, tuple=[1])
    assert struct.unpack(">H", request.encode()[3:5])[0] == 600


def test_dml_bodies_decode_uuid_and_decimal_with_the_box_ext_hook():
    import decimal
    import uuid as uuid_module

    from spindle.core.iproto.msgpack import ext_hook, packb
    from spindle.core.iproto.request import decode_dml_body
    value, number = uuid_module.uuid4(), decimal.Decimal("1.25")
    body = packb({0x10: 512, 0x21: [value, number]})
    request = decode_dml_body(body, 2, ext_hook)
    assert request.tuple == [value, number]
    assert decode_dml_body(body, 2).tuple[0] != value      # raw ExtType without the hook


# ---------------------------------------------------------------------------
# decode_rows (the usual headers read in one loop) against decode_rows_strict:
# the same rows, or the same refusal, whatever the bytes.

def _payload_rows():
    body = encode_dml_body(IprotoType.INSERT, 512, tuple=[1, "x"])
    rows = [XRow(IprotoType.INSERT, body, 1, 70000, 1.5, 0, 70000, True),
            XRow(IprotoType.REPLACE, body, 2, 200, 2.5, 0, 199, False),
            XRow(IprotoType.REPLACE, body, 2, 201, 2.5, 0, 199, True),
            XRow(IprotoType.INSERT, body, 0, 5, 0.0, 1, 6, False),       # wrapped TSN
            XRow(IprotoType.NOP, None, 3, 1 << 40, 3.0),
            XRow(IprotoType.INSERT, body, 1, 9, 1.0, sync=7, schema_version=3)]
    parts = [row.encode(0) for row in rows]
    parts[-1] = XRow(IprotoType.INSERT, body, 1, 9, 1.0, sync=7).encode()   # a SYNC kept
    return rows, b"".join(parts)


def _outcome(decode, payload):
    try:
        rows = decode(payload)
    except ClientError as err:
        return ("error", err.code, str(err), getattr(err, "offset", None))
    # by their fields' reprs: a mutated TIMESTAMP may be a NaN, which equals nothing
    return [repr(row._identity()) for row in rows]


def test_decode_rows_reads_what_the_strict_decoder_reads():
    from spindle.core.iproto.row_block import decode_rows_strict
    from spindle.core.iproto.xrow import tsn_field, tsn_of
    rows, payload = _payload_rows()
    decoded = decode_rows(payload)
    assert decoded == decode_rows_strict(payload)
    assert [row.tsn for row in decoded[:4]] == [70000, 199, 199, 6]
    assert tsn_of(5, tsn_field(5, 6)) == 6 and tsn_field(5, 6) == (1 << 64) - 1


@settings(max_examples=500)
@given(st.integers(0, 10_000), st.integers(0, 255), st.booleans())
def test_mutated_payloads_decode_as_the_strict_decoder_decodes_them(where, byte, cut):
    from spindle.core.iproto.row_block import decode_rows_strict
    _, payload = _payload_rows()
    where %= len(payload)
    mutated = payload[:where] if cut else payload[:where] + bytes((byte,)) + payload[where + 1:]
    assert _outcome(decode_rows, mutated) == _outcome(decode_rows_strict, mutated)


def _visited(payload):
    """visit_rows' rows (copies: it reads every row into one) and, after them, its
    error as _outcome gives it; with its count of rows."""
    import copy
    from spindle.core.iproto.row_block import UnreadableRow, visit_rows
    seen: list[XRow] = []
    into = XRow(0)
    try:
        count = visit_rows(payload, into, lambda row: seen.append(copy.copy(row)))
    except UnreadableRow as unreadable:
        assert unreadable.visited == len(seen)      # (recovery counts them so)
        err = unreadable.error
        return [repr(row._identity()) for row in seen], ("error", err.code, str(err),
                                                         getattr(err, "offset", None))
    assert count == len(seen) and all(row is not into for row in seen)
    return [repr(row._identity()) for row in seen], None


def test_visit_rows_reads_into_one_row_what_decode_rows_reads():
    from spindle.core.iproto.row_block import visit_rows
    _, payload = _payload_rows()
    assert _visited(payload) == (_outcome(decode_rows, payload), None)
    into, kept = XRow(0), []
    assert visit_rows(payload, into, kept.append) == 6
    assert kept == [into] * 6 and into == decode_rows(payload)[-1]    # one row, read over
    assert visit_rows(b"", into, kept.append) == 0


@settings(max_examples=500)
@given(st.integers(0, 10_000), st.integers(0, 255), st.booleans())
def test_mutated_payloads_are_visited_as_decode_rows_decodes_them(where, byte, cut):
    """The same rows, or the same error after the rows before the defect (which
    the strict decoder, reading the rest, has not seen)."""
    from spindle.core.iproto.row_block import decode_rows_strict
    _, payload = _payload_rows()
    where %= len(payload)
    mutated = payload[:where] if cut else payload[:where] + bytes((byte,)) + payload[where + 1:]
    rows, error = _visited(mutated)
    expected = _outcome(decode_rows, mutated)
    if error is None:
        assert rows == expected
    else:
        assert error == expected
        offset = error[3]
        assert rows == [repr(row._identity())
                        for row in decode_rows_strict(mutated[:offset])][:len(rows)]


# ------------------------------------------- the one strict header decoder (xrow)

def test_strict_header_wraps_the_uint32_fields_as_2_6_0_does():
    """type, replica_id, group_id and schema_version are uint32_t in 2.6.0's
    struct xrow_header: a larger value wraps; sync and lsn do not. read_rows leaves
    such a header to the strict decoder."""
    from spindle.core.iproto.xrow import NotUsual, decode_header, usual_header
    big = b"\xcf" + ((1 << 32) + 2).to_bytes(8, "big")
    wide = b"\xcf" + ((1 << 40) + 7).to_bytes(8, "big")
    raw = b"\x86\x00" + big + b"\x01" + wide + b"\x02" + big + b"\x03" + wide \
        + b"\x05" + big + b"\x07" + big
    row, end = decode_header(raw, 0, len(raw))
    assert end == len(raw)
    assert (row.type, row.replica_id, row.schema_version, row.group_id) == (2, 2, 2, 2)
    assert (row.sync, row.lsn) == ((1 << 40) + 7, (1 << 40) + 7)
    with pytest.raises(NotUsual):
        usual_header(raw)
    narrow = b"\x83\x00\xce\x00\x00\x00\x02\x01\x05\x03\xcf" + (1 << 40).to_bytes(8, "big")
    assert usual_header(narrow)[0] == decode_header(narrow, 0, len(narrow))[0]


def test_strict_header_error_carries_the_sync_read_before_it():
    """A key of the wrong type after SYNC: the error names the sync read (2.6.0
    answers with it); a header that is not whole MsgPack fails before any field is
    read (2.6.0 checks it first): sync 0."""
    from spindle.core.iproto.errors import ClientError
    from spindle.core.iproto.xrow import decode_header
    with pytest.raises(ClientError) as bad_type:
        decode_header(b"\x82\x01\x2a\x00\xa1x", 0, 6)
    assert bad_type.value.sync == 42 and "packet header" in str(bad_type.value)
    with pytest.raises(ClientError) as cut:
        decode_header(b"\x83\x01\x2a\x00\x02", 0, 5)
    assert cut.value.sync == 0
