"""chap-sha1, Tarantool's password scheme (iproto.md §8.1).

    hash1    = SHA1(password)
    hash2    = SHA1(hash1)                 stored in _user: {'chap-sha1': base64(hash2)}
    scramble = hash1 XOR SHA1(salt[:20] + hash2)          sent by the client in AUTH
    check:     SHA1(scramble XOR SHA1(salt[:20] + hash2)) == hash2

The server never learns the password and the scramble is useless with another
salt. Both sides live here: the server checks a scramble against the stored hash;
the replication applier (a client) computes one from its URI's password.
"""
from __future__ import annotations

import base64
import binascii
import os

from spindle.core.iproto.constants import IprotoKey, IprotoType
from spindle.core.iproto.msgpack import pack
from spindle.core.iproto.xrow import XRow

CHAP_SHA1 = "chap-sha1"
SCRAMBLE_SIZE = 20        # SHA1 digest size: the scramble and the part of the salt used
GREETING_SALT_SIZE = 32   # random bytes a greeting carries (base64: 44 characters)


def _bytes(password: str | bytes) -> bytes:
    return password.encode("utf-8", "surrogateescape") if isinstance(password, str) else password


def _sha1(data: bytes) -> bytes:
    import hashlib   # here: OpenSSL's start-up costs every instance start ~2 ms
    return hashlib.sha1(data).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def generate_salt(size: int = GREETING_SALT_SIZE) -> bytes:
    """A fresh random salt for one connection's greeting."""
    return os.urandom(size)


def hash2(password: str | bytes) -> bytes:
    """SHA1(SHA1(password)): what the server keeps (in binary form)."""
    return _sha1(_sha1(_bytes(password)))


def password_hash(password: str | bytes) -> str:
    """The `chap-sha1` value of a `_user` row's auth map: base64(SHA1(SHA1(password)))."""
    return base64.b64encode(hash2(password)).decode("ascii")


def decode_stored_hash(stored: str | bytes | None) -> bytes | None:
    """hash2 from the stored base64 form (or raw 20 bytes); None if unusable.

    A user without a password has no hash: no scramble matches it, as in
    Tarantool, where such a user's hash2 is all zeros.
    """
    if stored is None:
        return None
    if isinstance(stored, bytes) and len(stored) == SCRAMBLE_SIZE:
        return stored
    try:
        raw = base64.b64decode(stored, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return None
    return raw if len(raw) == SCRAMBLE_SIZE else None


def scramble(salt: bytes, password: str | bytes) -> bytes:
    """The client's proof of `password` for a greeting's `salt` (only salt[:20] is used)."""
    h1 = _sha1(_bytes(password))
    return _xor(h1, _sha1(salt[:SCRAMBLE_SIZE] + _sha1(h1)))


def check_scramble(client_scramble: bytes, salt: bytes, stored: str | bytes | None) -> bool:
    """True if `client_scramble` proves knowledge of the password whose hash is `stored`.

    `stored` is the base64 text kept in `_user` (or the raw hash2). Constant-time compare.
    """
    h2 = decode_stored_hash(stored)
    if h2 is None or len(client_scramble) != SCRAMBLE_SIZE:
        return False
    h1 = _xor(client_scramble, _sha1(salt[:SCRAMBLE_SIZE] + h2))
    import hmac
    return hmac.compare_digest(_sha1(h1), h2)


def encode_auth_body(user: str, client_scramble: bytes) -> bytes:
    """`{USER_NAME: user, TUPLE: ["chap-sha1", scramble]}` with the scramble as a
    MsgPack str (`b4` + 20 bytes), byte for byte as a 2.6.0 applier sends it."""
    if len(client_scramble) != SCRAMBLE_SIZE:
        raise ValueError("a chap-sha1 scramble is 20 bytes")
    return (b"\x82" + bytes((IprotoKey.USER_NAME,)) + pack(user)
            + bytes((IprotoKey.TUPLE,)) + b"\x92" + pack(CHAP_SHA1)
            + bytes((0xA0 | SCRAMBLE_SIZE,)) + client_scramble)


def encode_auth_request(user: str, password: str | bytes, salt: bytes, sync: int = 0) -> bytes:
    """A complete AUTH packet (length prefix, compact header, body) for a client."""
    body = encode_auth_body(user, scramble(salt, password))
    return XRow(type=IprotoType.AUTH, body=body).encode_frame(sync)
