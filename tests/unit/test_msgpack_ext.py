"""MsgPack extensions whatever their payload (core/iproto/msgpack.py) and what the
engine does with them: the payload rules of 2.6.0's decimal_unpack / uuid_unpack /
error_unpack, raw extensions stored and packed back byte for byte, the field-type
table of field_mp_type_is_compatible, refusals where 2.6.0 would crash, and the
decoders (requests, rows, the exact decoder) meeting garbage, truncation and wrong
types with Tarantool errors only. The oracle side is tests/interop/
test_bad_input_oracle.py."""
from __future__ import annotations

import decimal
import uuid

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from spindle.core.box.field_types import FieldType, is_compatible
from spindle.core.iproto.msgpack import (
    ExtDecimal, MsgpackError, decimal_unpack, error_unpack, ext_hook, needs_exact, pack, packb,
    raw_ext, unpack, unpack_exact, unpackb, uuid_unpack,
)
from spindle.core.box.index import IndexDef
from spindle.core.box.key_def import KeyPart
from spindle.core.box.txn import Engine
from spindle.core.box.update import update_tuple
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import decode_dml_body, decode_dml_packet, decode_relay_put_frame
from spindle.core.iproto.xrow import XRow, frame
from spindle.core.net.protocol import UNDECODABLE, PacketError, decode_packet
from spindle.core.net.requests import decode_request, decode_request_fast

D = decimal.Decimal
UUID_BYTES = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8").bytes


def ext(code: int, data: bytes) -> bytes:
    """The MsgPack of an extension, any type code (negative ones too)."""
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}
    if len(data) in fixed:
        return bytes((fixed[len(data)], code & 0xFF)) + data
    return bytes((0xC7, len(data), code & 0xFF)) + data


# ------------------------------------------------------------------ payload rules

@pytest.mark.parametrize("payload, value", [
    (b"\x01\x15\x0c", D("15.0")),                 # scale 1, digits 150
    (b"\x00\x0c", D("0")), (b"\x00\x0d", D("-0")),
    (b"\x00\x1a", D("1")), (b"\x00\x1b", D("-1")), (b"\x00\x1e", D("1")), (b"\x00\x1f", D("1")),
    (b"\xff\x1c", D("1E+1")),                     # scale -1
    (b"\x26\x1c", D("1E-38")),                    # scale 38, the largest
    (b"\xcc\x05\x1c", D("0.00001")),              # a wide scale
    (b"\xcf\x00\x00\x00\x01\x00\x00\x00\x05\x1c", D("0.00001")),   # int32 of 2^32 + 5
    (b"\x00\x00\x00\x12\x3c", D("123")),          # leading zero bytes
    (b"\x00" + b"\x11" * 20 + b"\x1c", D("1" * 41)),    # past a decimal_t: 2.6.0 takes it
])
def test_decimal_payloads_2_6_0_reads(payload, value):
    got = decimal_unpack(payload)
    assert got == value and str(got) == str(value)
    assert got.is_signed() == value.is_signed()
    assert packb(got) == ext(1, payload)          # back as it came, whatever the form


@pytest.mark.parametrize("payload", [
    b"",                      # nothing
    b"\x00",                  # a scale and no digits
    b"\xc0\x1c", b"\xa1a\x1c", b"\xca\x00\x00\x00\x00\x1c",    # no integer scale
    b"\xcd\x03",              # a scale cut short
    b"\x27\x1c",              # scale 39
    b"\xda\x1c",              # scale -38 (0xda is no fixint: a str16 header)
    b"\xd0\xda\x1c",          # scale -38
    b"\xcd\x03\xe8\x1c",      # scale 1000
    b"\x00\x12", b"\x00\x10",                     # no sign nibble
    b"\x00\xaa\x1c", b"\x00\xa1\x1c",             # a digit nibble above 9
])
def test_decimal_payloads_2_6_0_refuses_stay_raw(payload):
    assert decimal_unpack(payload) is None
    value = ext_hook(1, payload)
    assert value == raw_ext(1, payload)
    assert packb([value]) == b"\x91" + ext(1, payload)


def test_only_non_canonical_decimals_carry_their_bytes():
    assert type(decimal_unpack(b"\x01\x15\x0c")) is D
    odd = decimal_unpack(b"\x00\x1a")
    assert type(odd) is ExtDecimal and odd == D(1) and hash(odd) == hash(D(1))
    assert type(odd + 1) is D and packb(odd + 1) == ext(1, b"\x00\x2c")


@pytest.mark.parametrize("data, valid", [
    (UUID_BYTES, True), (b"\x01" * 16, True),                 # NCS variant: valid
    (b"\x00" * 8 + b"\xc5" + b"\x00" * 7, True),              # Microsoft variant
    (b"\x00" * 8 + b"\xe0" + b"\x00" * 7, False),             # reserved variant
    (b"\x01" * 15, False), (b"\x01" * 17, False), (b"", False),
])
def test_uuid_payloads(data, valid):
    assert (uuid_unpack(data) is not None) == valid
    value = ext_hook(2, data)
    assert isinstance(value, uuid.UUID) == valid
    assert packb(value) == ext(2, data)


@pytest.mark.parametrize("code", [0, 3, 31, 32, 33, 42, 127, -1, -5, -128])
def test_other_extensions_stay_raw_and_pack_back(code):
    for data in (b"", b"a", b"abc", b"x" * 16, b"y" * 300):
        raw = ext(code, data) if len(data) < 256 else (
            b"\xc8" + len(data).to_bytes(2, "big") + bytes((code & 0xFF,)) + data)
        value = unpackb(raw)
        assert value == raw_ext(code, data)
        assert packb(value) == raw


MP_ERROR_CUSTOM = bytes.fromhex(
    "8100918700ab437573746f6d4572726f7202ceffffffff01a35b435d03a96d7920726561736f6e0400"
    "054d0681ab637573746f6d5f74797065a74d794572726f72")      # 2.6.0's own encoding


def test_error_payloads():
    err = error_unpack(MP_ERROR_CUSTOM)
    assert (err.type, err.code, err.message, err.file, err.line) == \
        ("MyError", 77, "my reason", "[C]", 0xFFFFFFFF)
    two = msgpack.packb({0: [{0: "ClientError", 1: "a.c", 2: 1, 3: "first", 5: 1},
                             {0: "TimedOut", 1: "b.c", 3: "second"}]})
    first = error_unpack(two)
    assert (first.message, first.code, first.prev.message, first.prev.type) == \
        ("first", 1, "second", "TimedOut")
    for bad in (b"", b"\x01\x02", msgpack.packb({0: 1}), msgpack.packb({0: []}),
                msgpack.packb({"x": []}), msgpack.packb({0: [{0: "ClientError", 3: "no file"}]}),
                msgpack.packb({0: [{0: "CustomError", 1: "f", 3: "no custom type"}]}),
                msgpack.packb({0: [{0: "ClientError", 1: "f", 3: "m", 2: -1}]}),
                msgpack.packb({0: [{0: "ClientError", 1: b"bin", 3: "m"}]}),
                MP_ERROR_CUSTOM[:-3]):
        assert error_unpack(bad) is None, bad


# ------------------------------------------------------------------ field types

@pytest.mark.parametrize("code, fits", [
    (1, {"any", "number", "scalar", "decimal"}),
    (33, {"any", "number", "scalar", "decimal"}),      # 1 << 33 is 1 << 1 on x86-64
    (2, {"any", "uuid"}), (34, {"any", "uuid"}), (66, {"any", "uuid"}),
    (3, {"any"}), (31, {"any"}), (35, {"any"}), (127, {"any"}),
    (0, set()), (32, set()), (64, set()), (96, set()),   # MP_UNKNOWN_EXTENSION's bit
    (-1, set()), (-5, set()), (-128, set()),
])
def test_field_types_take_extensions_by_code(code, fits):
    value = raw_ext(code, b"\x00\x0c" if code & 31 == 1 else b"ab")
    for ftype in FieldType:
        assert is_compatible(ftype, value) == (ftype.value in fits), (ftype, code)
    assert is_compatible(FieldType.ANY, msgpack.Timestamp(1, 0)) is False


@pytest.fixture
def engine():
    return Engine(journal=lambda rows: None)


def _err(fn, *args) -> ClientError:
    with pytest.raises(ClientError) as caught:
        fn(*args)
    return caught.value


def test_formatted_any_refuses_what_an_unformatted_field_takes(engine):
    space = engine.create_space(512, "t", format=[{"name": "id", "type": "unsigned"},
                                                  {"name": "v", "type": "any"}])
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    for code in (0, 32, -5):
        assert str(_err(space.insert, [1, raw_ext(code, b"ab")])) == \
            "Tuple field 2 type does not match one required by operation: expected any"
        assert space.insert([code + 1000, 1, raw_ext(code, b"ab")])[2].code == code
    assert space.insert([2, raw_ext(42, b"ab")])[1] == raw_ext(42, b"ab")
    assert space.insert([3, None])[1] is None


def test_index_over_a_malformed_decimal_refuses_and_changes_nothing(engine):
    space = engine.create_space(512, "t")
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "unsigned")]))
    space.create_index(IndexDef(1, "dk", parts=[KeyPart(1, "decimal")]))
    space.create_index(IndexDef(2, "sk", parts=[KeyPart(2, "scalar")]))
    space.insert([1, D("1.5"), D("2")])
    for tup in ([2, raw_ext(1, b""), 5], [2, D(7), raw_ext(1, b"\x00\xaa\x1c")],
                [2, raw_ext(33, b"\x00\x0c"), 5]):
        error = _err(space.insert, tup)
        assert (error.code, str(error)) == (ErrorCode.ER_INVALID_MSGPACK,
                                            "Invalid MsgPack - packet body")
        error = _err(space.replace, [1] + tup[1:])
        assert error.code == ErrorCode.ER_INVALID_MSGPACK
    assert space.select() == [(1, D("1.5"), D("2"))]
    for index_id in (0, 1, 2):
        assert len(space.index(index_id)) == 1
    assert _err(space.select, [raw_ext(1, b"\x00")], 1).code == ErrorCode.ER_INVALID_MSGPACK
    assert space.select([D("1.5")], 1) == [(1, D("1.5"), D("2"))]


def test_uuid_index_takes_a_16_byte_payload_only(engine):
    space = engine.create_space(512, "u")
    space.create_index(IndexDef(0, "pk", parts=[KeyPart(0, "uuid")]))
    odd = raw_ext(2, b"\x00" * 8 + b"\xe0" + b"\x00" * 7)       # a variant 2.6.0 refuses
    assert space.insert([odd]) == (odd,)
    assert space.insert([uuid.UUID(bytes=UUID_BYTES)])
    assert [t[0] for t in space.select()] == [odd, uuid.UUID(bytes=UUID_BYTES)]  # by bytes
    for bad in (raw_ext(2, b"\x01" * 15), raw_ext(2, b""), raw_ext(34, b"\x01" * 17)):
        assert _err(space.insert, [bad]).code == ErrorCode.ER_INVALID_MSGPACK
    assert len(space.select()) == 2


def test_update_arithmetic_with_extensions():
    ops = [["+", 2, raw_ext(1, b"\x27\x1c")]]       # a decimal 2.6.0 cannot unpack
    error = _err(update_tuple, [1, 5], ops)
    assert (error.code, str(error)) == (ErrorCode.ER_ILLEGAL_PARAMS,
                                        "Illegal parameters, can't unpack update operations")
    error = _err(update_tuple, [1, 5], [["+", 2, raw_ext(42, b"")]])
    assert str(error) == ("Argument type in operation '+' on field 2 does not match field "
                          "type: expected a number")
    # a field holding a decimal 2.6.0 cannot read counts as what its decimal_t then
    # holds: 0 when the digits were refused, garbage (refused here) when the scale was
    for payload in (b"\x00\xaa\x1c", b"\x00\x12", b"\x00"):
        assert update_tuple([1, raw_ext(1, payload)], [["+", 2, 1]]) == (1, D(1))
    for payload in (b"", b"\xc0\x1c", b"\x27\x1c", b"\xcd\x03"):
        error = _err(update_tuple, [1, raw_ext(1, payload)], [["+", 2, 1]])
        assert error.code == ErrorCode.ER_UPDATE_ARG_TYPE
    assert update_tuple([1, 5], [["=", 2, raw_ext(-5, b"x")]])[1] == raw_ext(-5, b"x")
    error = _err(update_tuple, [1, D("1" * 40)], [["+", 2, 1]])
    assert str(error) == "Decimal overflow when performing operation '+' on field 2"


# ------------------------------------------------------------------ decoders

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.floats()
    | st.text() | st.binary()
    | st.builds(raw_ext, st.integers(-128, 127), st.binary(max_size=20)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.integers() | st.text(), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_exact_decoder_agrees_with_the_c_one(value):
    try:
        raw = pack(value)
    except OverflowError:           # an integer key beyond 64 bits
        return
    exact, end = unpack_exact(raw)
    assert end == len(raw) and pack(exact) == raw
    assert pack(unpack(raw)) == raw
    # every cut is refused with MsgpackError, never anything else
    for cut in range(len(raw)):
        with pytest.raises(MsgpackError):
            unpack_exact(raw[:cut])


@pytest.mark.parametrize("raw", [b"\xc1", b"\x91\xc1", b"\xd9\x05ab", b"\xdc\xff\xff",
                                 b"\xc7\x05\x01ab"])
def test_exact_decoder_refuses_garbage(raw):
    with pytest.raises(MsgpackError):
        unpack_exact(raw)


def test_exact_decoder_refuses_what_nests_too_deep():
    deep = b"\x91" * 2000 + b"\xd6\xff\x00\x00\x00\x01"
    with pytest.raises(MsgpackError):
        unpack_exact(deep)
    with pytest.raises(ClientError):
        unpack(deep)
    assert unpack_exact(b"\x91" * 300 + b"\x01")[1] == 301


@pytest.mark.parametrize("raw", [b"\x81\x92\x01\xa1\xff\x03",       # {[1, '\xff']: 3}
                                 b"\x81\x81\x01\x02\x03",            # {{1: 2}: 3}
                                 b"\x92\x01\x81\x91\x81\x01\x02\x03"])
def test_maps_keyed_by_arrays_and_maps(raw):
    """MsgPack lets anything be a key; 2.6.0 stores such maps, and so do we."""
    for value in (unpack(raw), unpackb(raw), unpack_exact(raw)[0]):
        assert packb(value) == raw
    packet = decode_packet(_insert_packet(b"\x82\x10\xcd\x02\x00\x21\x92\x01" + raw))
    assert packb(decode_request(packet).tuple) == b"\x92\x01" + raw


def test_timestamps_are_kept_as_they_came():
    for data in (b"\x00\x00\x00\x01", b"\x00" * 7 + b"\x01", b"\x00" * 11 + b"\x01",
                 b"\x01\x02\x03"):
        raw = b"\x92\x01" + ext(-1, data)
        assert needs_exact(raw)
        value = unpack(raw)
        assert value == [1, raw_ext(-1, data)]
        assert packb(value) == raw and packb(unpackb(raw)) == raw
    assert not needs_exact(b"\x92\xff\xff") and not needs_exact(b"\x91\xa2\xff\xfe")


def _insert_packet(body: bytes, sync: int = 7) -> bytes:
    return msgpack.packb({0: 2, 1: sync}) + body


BAD_TUPLES = [
    [1, b"\xff\xfe"],
    [1, raw_ext(-5, b"ab")], [1, raw_ext(-1, b"\x01\x02\x03")], [1, raw_ext(1, b"")],
    [1, raw_ext(2, b"\x01" * 15)], [1, raw_ext(3, b"\x01")], [1, raw_ext(42, b"")],
]


@pytest.mark.parametrize("tup", BAD_TUPLES)
def test_requests_with_odd_values_decode_as_they_came(tup):
    body = b"\x82\x10\xcd\x02\x00\x21" + packb(tup).replace(b"\xc4\x02\xff\xfe", b"\xa2\xff\xfe")
    packet = _insert_packet(body)
    request = decode_request(decode_packet(packet))
    assert packb({0x10: 512, 0x21: request.tuple}) == body
    fast = decode_request_fast(packet)
    assert fast is None or fast.tuple == request.tuple


def test_request_decoders_never_raise_python_errors():
    good = _insert_packet(b"\x82\x10\xcd\x02\x00\x21\x92\x01" + ext(-1, b"\x01\x02\x03"))
    for cut in range(len(good)):
        packet = good[:cut]
        try:
            decode_request(decode_packet(packet))
        except (PacketError, ClientError):
            pass
        assert decode_request_fast(packet) is None or cut == len(good)
    # a body msgpuck takes but the C unpacker refuses (0xc1) is still judged, not raised
    packet = decode_packet(_insert_packet(b"\x82\x10\xcd\x02\x00\x21\x91\xc1"))
    assert packet.body is UNDECODABLE
    with pytest.raises(ClientError) as caught:
        decode_request(packet)
    assert str(caught.value) == "Invalid MsgPack - packet body"


@pytest.mark.parametrize("tup", BAD_TUPLES + [[1, raw_ext(1, b"\x00\x1a")]])
def test_replicated_rows_with_odd_values(tup):
    """The strict decoder, the quick one and the relay-frame one agree, and what
    they give packs back to the row's bytes."""
    body = b"\x82\x10\xcd\x02\x00\x21" + packb(tup)
    packet = XRow(2, body, 1, 300, 1700000000.5, 0, 300, True).encode()
    assert packb(decode_dml_body(body, 2, ext_hook).tuple) == packb(tup)
    quick = decode_dml_packet(packet, ext_hook)
    assert quick is None or packb(quick[1].tuple) == packb(tup)
    relay = decode_relay_put_frame(frame(packet), 0, ext_hook)
    assert relay is None or packb(relay[1].tuple) == packb(tup)
