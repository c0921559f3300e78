"""Error reply bodies as Tarantool 2.6.0 sends them (issue 23 item 7).

The expected bytes are replies of the live 2.6.0 binary, captured with a raw socket
client (the same requests run in tests/interop/test_netbox_errors_oracle.py)."""
from __future__ import annotations

from spindle.core.box.access import AccessDeniedError
from spindle.core.iproto.errors import (BoxError, ClientError, CustomError, ErrorCode,
                                        TimedOut, iproto_code)
from spindle.core.iproto.msgpack import error_unpack, pack
from spindle.core.net.protocol import encode_error_body, error_code
from spindle.lua.errors import LuaError

# INSERT into a space guest may only read
ACCESS_DENIED = bytes.fromhex(
    "8231d93557726974652061636365737320746f2073706163652027726f272069732064656e6965"
    "6420666f7220757365722027677565737427528100918700b141636365737344656e6965644572"
    "726f72025b01b12e2f7372632f626f782f73706163652e6303d935577269746520616363657373"
    "20746f2073706163652027726f272069732064656e69656420666f722075736572202767756573"
    "74270400052a0683ab6f626a6563745f74797065a57370616365ab6f626a6563745f6e616d65a2"
    "726fab6163636573735f74797065a55772697465")
# box.error(box.error.new{type = 'MyError', reason = 'boom', code = 55}), server.lua:15
CUSTOM = bytes.fromhex(
    "8231a4626f6f6d528100918700ab437573746f6d4572726f72020f01aa7365727665722e6c7561"
    "03a4626f6f6d040005370681ab637573746f6d5f74797065a74d794572726f72")
# outer (CustomError 'Outer') <- middle (ClientError 1) <- inner (CustomError 'Inner', 2)
CHAINED = bytes.fromhex(
    "8231a56f75746572528100938700ab437573746f6d4572726f72021801aa7365727665722e6c75"
    "6103a56f75746572040005000681ab637573746f6d5f74797065a54f757465728600ab436c6965"
    "6e744572726f72021601aa7365727665722e6c756103ba496c6c6567616c20706172616d657465"
    "72732c206d6964646c65040005018700ab437573746f6d4572726f72021501aa7365727665722e"
    "6c756103ab696e6e6572206361757365040005020681ab637573746f6d5f74797065a5496e6e65"
    "72")
# error('plain lua error') in a function called over IPROTO
PLAIN = bytes.fromhex(
    "8231be7365727665722e6c75613a32383a20706c61696e206c7561206572726f72528100918600"
    "ab4c75616a69744572726f7202cd03ed01b12e2f7372632f6c75612f7574696c732e6303be7365"
    "727665722e6c75613a32383a20706c61696e206c7561206572726f7204000520")


def test_access_denied_carries_its_fields():
    err = AccessDeniedError("Write", "space", "ro", "guest").located("./src/box/space.c", 91)
    assert encode_error_body(err) == ACCESS_DENIED
    assert error_code(err) == ErrorCode.ER_ACCESS_DENIED


def test_custom_error_goes_out_as_customerror_with_its_type():
    err = CustomError("MyError", "boom", 55).located("server.lua", 15)
    assert (err.type, err.base_type, err.code) == ("MyError", "CustomError", 55)
    assert encode_error_body(err) == CUSTOM
    assert error_code(err) == 55


def test_a_chain_is_the_stack_newest_first():
    inner = CustomError("Inner", "inner cause", 2).located("server.lua", 21)
    middle = ClientError(ErrorCode.ER_ILLEGAL_PARAMS, "middle").located("server.lua", 22)
    outer = CustomError("Outer", "outer").located("server.lua", 24)
    middle.prev, outer.prev = inner, middle
    assert encode_error_body(outer) == CHAINED


def test_a_lua_error_is_a_luajiterror_of_utils_c():
    assert encode_error_body(LuaError("server.lua:28: plain lua error")) == PLAIN


def test_the_code_of_a_class_as_get_errcode_gives_it():
    def typed(name: str, code: int = 0) -> BoxError:
        err = BoxError("m", code)
        err.type = name
        return err
    assert iproto_code(typed("ClientError", 7)) == 7
    assert iproto_code(typed("AccessDeniedError", 42)) == 42
    assert iproto_code(TimedOut()) == ErrorCode.ER_SYSTEM
    assert iproto_code(typed("SystemError")) == ErrorCode.ER_SYSTEM
    assert iproto_code(typed("SocketError")) == ErrorCode.ER_SYSTEM
    assert iproto_code(typed("OutOfMemory", 2)) == ErrorCode.ER_MEMORY_ISSUE
    assert iproto_code(typed("CollationError")) == ErrorCode.ER_CANT_CREATE_COLLATION
    assert iproto_code(typed("XlogError")) == ErrorCode.ER_PROC_LUA
    assert iproto_code(typed("LuajitError", 99)) == ErrorCode.ER_PROC_LUA


def test_messages_are_cut_at_511_bytes():
    body = encode_error_body(BoxError("\u00e9" * 300, 1))
    assert body[2:5] == b"\xda\x01\xff"            # ERROR_24: a str of 511 bytes
    assert body[5 + 510:5 + 512] == b"\xc3\x52"      # cut inside a character, as in 2.6.0
    assert len(CustomError("t" * 100, "x").type) == 63


def test_decoded_errors_keep_their_class_and_fields():
    stack = {0: [{0: "CustomError", 1: "f", 2: 1, 3: "boom", 4: 0, 5: 55,
                  6: {"custom_type": "MyError"}},
                 {0: "AccessDeniedError", 1: "f", 2: 2, 3: "denied", 4: 0, 5: 42,
                  6: {"object_type": "space", "object_name": "ro", "access_type": "Write"}}]}
    err = error_unpack(pack(stack))
    assert isinstance(err, CustomError) and err.type == "MyError" and err.code == 55
    assert err.fields == {"custom_type": "MyError"}
    assert err.prev.type == "AccessDeniedError" and err.prev.code == 42
    assert err.prev.fields == {"object_type": "space", "object_name": "ro",
                               "access_type": "Write"}
