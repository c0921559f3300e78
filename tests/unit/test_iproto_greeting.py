"""The 128-byte greeting against live 2.6.0 captures (iproto.md §1)."""
from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.greeting import (
    GREETING_SIZE, Greeting, decode_greeting, encode_greeting,
)

WIRE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6" / "wire"
UUID1 = "11111111-1111-4111-8111-111111111111"
CAPTURES = [WIRE / "join-subscribe" / "conn1-s2c.bin",
            WIRE / "anon-fetch-register" / "conn1-s2c.bin",
            WIRE / "anon-fetch-register" / "conn2-s2c.bin"]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.parent.name + "/" + p.name)
def test_encode_equals_live_greeting(capture):
    live = capture.read_bytes()[:GREETING_SIZE]
    salt = base64.b64decode(live[64:108])
    assert encode_greeting(UUID1, salt) == live
    greeting = decode_greeting(live)
    assert greeting == Greeting((2, 6, 0), "Binary", UUID1, salt)
    assert greeting.version_id == 0x020600


def test_layout():
    data = encode_greeting(UUID1, bytes(range(32)))
    assert len(data) == 128
    assert data[:61] == b"Tarantool 2.6.0 (Binary) " + UUID1.encode()
    assert data[61:63] == b"  " and data[63:64] == b"\n" and data[127:] == b"\n"
    assert data[64:108] == base64.b64encode(bytes(range(32)))
    assert data[108:127] == b" " * 19


@given(salt=st.binary(min_size=20, max_size=45), uuid=st.uuids(),
       version=st.tuples(st.integers(0, 9), st.integers(0, 99), st.integers(0, 9)))
def test_roundtrip(salt, uuid, version):
    text = ".".join(map(str, version))
    data = encode_greeting(str(uuid), salt, version=text)
    assert len(data) == GREETING_SIZE
    greeting = decode_greeting(data)
    assert greeting.salt == salt and greeting.version == version
    if version >= (1, 6, 7):
        assert greeting.uuid == str(uuid)


def _good() -> bytearray:
    return bytearray(encode_greeting(UUID1, bytes(32)))


def _bad_cases():
    cases = {}
    g = _good(); g[0:9] = b"Tarantoo!"; cases["magic"] = g
    g = _good(); g[63] = ord(" "); cases["no newline 63"] = g
    g = _good(); g[127] = ord(" "); cases["no newline 127"] = g
    g = _good(); g[10:15] = b"2.x.0"; cases["version"] = g
    g = _good(); g[25:30] = b"zzzzz"; cases["uuid"] = g
    g = _good(); g[64:127] = base64.b64encode(bytes(10)).ljust(63); cases["short salt"] = g
    g = _good(); g[64:127] = b"!!!!".ljust(63); cases["salt not base64"] = g
    cases["short"] = bytes(_good()[:127])
    return cases


@pytest.mark.parametrize("name", sorted(_bad_cases()))
def test_malformed_greeting_is_er_protocol(name):
    with pytest.raises(ClientError) as info:
        decode_greeting(bytes(_bad_cases()[name]))
    assert info.value.code == ErrorCode.ER_PROTOCOL
    assert info.value.message == "Invalid greeting"


def test_other_protocol_is_parsed_without_salt():
    """A console greeting (as 2.6.0's console.listen sends it) decodes; refusing it
    for replication is the applier's job."""
    data = (b"Tarantool 2.6.0 (Lua console)".ljust(63) + b"\n"
            + b"type 'help' for interactive help".ljust(63) + b"\n")
    greeting = decode_greeting(data)
    assert greeting.protocol == "Lua console" and greeting.salt == b""


def test_old_version_needs_no_uuid():
    data = b"Tarantool 1.6.6 (Binary)".ljust(63) + b"\n" + base64.b64encode(bytes(20)).ljust(63) + b"\n"
    greeting = decode_greeting(data)
    assert greeting.uuid is None and greeting.version == (1, 6, 6)


def test_salt_decoding_is_lenient_like_tarantool():
    data = bytearray(encode_greeting(UUID1, bytes(range(32))))
    data[70] = ord("*")                       # a stray character is skipped
    assert decode_greeting(bytes(data)).salt != bytes(range(32))
    assert len(decode_greeting(bytes(data)).salt) >= 20


def test_fields_that_do_not_fit_are_refused():
    with pytest.raises(ValueError):
        encode_greeting(UUID1, bytes(48))          # 64 base64 chars > 63
