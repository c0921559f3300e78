"""MsgPack values of tuples, keys and operations as JSON text. No pyspark.

The JSON columns exist so SQL can reach into tuples (`get_json_object`,
`from_json`) without a UDF; the binary columns keep the exact MsgPack. JSON
cannot say everything MsgPack can, so some values take a documented shape:

* binary strings (MsgPack bin) -> base64 text;
* decimal (ext 1) -> its decimal text, uuid (ext 2) -> its canonical text,
  other extensions -> {"ext": type, "hex": data};
* map keys that JSON cannot hold (bin, arrays) -> their JSON text;
* strings that are not valid UTF-8 -> U+FFFD for the bad bytes (the binary
  column still has them);
* a value Python cannot even hold (a map as a map key) -> {"msgpack_hex": ...};
* NaN and infinities -> NaN / Infinity (Spark's JSON reader accepts them).
"""
from __future__ import annotations

import base64
import json
import uuid

import msgpack

EXT_DECIMAL, EXT_UUID = 1, 2

_unpackb = msgpack.unpackb


def _make_dumps():
    """A compact JSON encoder. JSONEncoder.encode() builds a new C encoder on
    every call, which is half its cost on small values: build it once."""
    fallback = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                                default=_json_default).encode
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    c_encode_str = getattr(json.encoder, "c_encode_basestring", None)
    if c_make_encoder is None or c_encode_str is None:
        return fallback
    try:
        # markers=None: no cycle check; MsgPack values cannot be cyclic.
        encoder = c_make_encoder(None, _json_default, c_encode_str, None, ":", ",",
                                 False, False, True)
        if "".join(encoder([1.5, "é", None], 0)) != '[1.5,"é",null]':
            return fallback
    except TypeError:            # another Python's private signature
        return fallback
    join = "".join
    return lambda obj: join(encoder(obj, 0))


def decimal_text(data: bytes) -> str:
    """Tarantool's MP_DECIMAL: a MsgPack int scale, then packed BCD digits whose
    last nibble is the sign (0xb or 0xd negative)."""
    scale, pos = _read_int(data)
    nibbles = []
    for byte in data[pos:]:
        nibbles += (byte >> 4, byte & 0x0F)
    sign = nibbles.pop() if nibbles else 0x0C
    digits = "".join(str(d) for d in nibbles).lstrip("0") or "0"
    if scale > 0:
        digits = digits.rjust(scale + 1, "0")
        digits = digits[:-scale] + "." + digits[-scale:]
    elif scale < 0:
        digits += "0" * -scale
    return ("-" if sign in (0x0B, 0x0D) and digits.strip("0.") else "") + digits


def _read_int(data: bytes) -> tuple[int, int]:
    unpacker = msgpack.Unpacker()
    unpacker.feed(data)
    value = unpacker.unpack()
    if not isinstance(value, int):
        raise ValueError("decimal scale is not an integer")
    return value, unpacker.tell()


def _ext_value(code: int, data: bytes):
    # Converted while unpacking: msgpack.ExtType is a tuple, which the JSON
    # encoder would print as an array before asking `default`.
    try:
        if code == EXT_DECIMAL:
            return decimal_text(data)
        if code == EXT_UUID and len(data) == 16:
            return str(uuid.UUID(bytes=data))
    except Exception:   # a malformed decimal (any unpack error): keep the bytes
        pass
    return {"ext": code, "hex": data.hex()}


def _json_default(obj):
    # Only bytes reach here: ext values are converted while unpacking.
    if isinstance(obj, (bytes, bytearray)):
        return base64.b64encode(obj).decode("ascii")
    raise TypeError(f"no JSON form for {type(obj).__name__}")


def _plain(obj):
    """Slow path: make every map key a string JSON accepts."""
    if isinstance(obj, (list, tuple)):
        return [_plain(item) for item in obj]
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                key = _dumps(_plain(key))
            out[key] = _plain(value)
        return out
    return obj


_dumps = _make_dumps()


def msgpack_to_json(raw: bytes) -> str:
    """JSON text of one MsgPack value."""
    try:
        # strict_map_key=False: Tarantool maps may have integer keys.
        return _dumps(_unpackb(raw, raw=False, strict_map_key=False, unicode_errors="replace",
                              ext_hook=_ext_value))
    except (TypeError, ValueError):
        # Keys that are arrays (unhashable as lists) or bytes: tuples keep them
        # hashable, then they are spelled out as strings.
        try:
            value = _unpackb(raw, raw=False, strict_map_key=False, unicode_errors="replace",
                             use_list=False, ext_hook=_ext_value)
        except (TypeError, ValueError):
            # A map used as a map key: nothing in Python can hold it.
            return _dumps({"msgpack_hex": raw.hex()})
        return _dumps(_plain(value))


def named_body_json(raw: bytes, names: dict[int, str]) -> str:
    """JSON of a non-DML body (CONFIRM, ROLLBACK, RAFT) with its integer keys
    named, e.g. {"replica_id": 1, "lsn": 22}."""
    body = _unpackb(raw, raw=False, strict_map_key=False, unicode_errors="replace",
                    use_list=False, ext_hook=_ext_value)
    if isinstance(body, dict):
        body = {names.get(key, key) if isinstance(key, int) else key: value
                for key, value in body.items()}
    return _dumps(_plain(body))
