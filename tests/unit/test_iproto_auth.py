"""chap-sha1 against the live 2.6.0 vectors (iproto.md §8.1, wire fixtures)."""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spindle.core.iproto import auth
from spindle.core.iproto.msgpack import unpack
from spindle.core.iproto.xrow import decode_row

WIRE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6" / "wire"

# (greeting salt, password, scramble the 2.6.0 applier sent) from two live captures
VECTORS = [
    ("1fLh/tBotZTSbCojmdOKi2r+Vukft9f8M3CNQ+Gtypc=", "secret",
     "afeb146ee78fa33c5597eccb219e97fc091a4ea5"),
    ("7T3KDlmYjH8o7c/Ks2zWB0lUDsnWuZYyZBd6WfpZ+8w=", "secret",
     "198c6acdec446a37af3e6b04251d9cf6247611f1"),
]
REPL_HASH = "FOZVZ6vbUTXQz9mnCzAywXmknuc="   # _user row of 'repl' (password 'secret')
GUEST_HASH = "vhvewKp0tNyweZQ+cFKAlsyphfg="  # _user row of 'guest' (password "")


def test_stored_hash_matches_user_rows():
    assert auth.password_hash("secret") == REPL_HASH
    assert auth.password_hash(b"secret") == REPL_HASH
    assert auth.password_hash("") == GUEST_HASH
    assert auth.hash2("secret") == base64.b64decode(REPL_HASH)


@pytest.mark.parametrize("salt_b64, password, expected", VECTORS)
def test_client_scramble_matches_live_applier(salt_b64, password, expected):
    salt = base64.b64decode(salt_b64)
    assert auth.scramble(salt, password).hex() == expected
    # only the first 20 salt bytes matter
    assert auth.scramble(salt[:20], password).hex() == expected


@pytest.mark.parametrize("salt_b64, password, expected", VECTORS)
def test_server_accepts_live_scramble(salt_b64, password, expected):
    salt = base64.b64decode(salt_b64)
    assert auth.check_scramble(bytes.fromhex(expected), salt, REPL_HASH)
    assert auth.check_scramble(bytes.fromhex(expected), salt, base64.b64decode(REPL_HASH))


def test_server_refuses_wrong_password_salt_or_size():
    salt = base64.b64decode(VECTORS[0][0])
    good = bytes.fromhex(VECTORS[0][2])
    assert not auth.check_scramble(auth.scramble(salt, "Secret"), salt, REPL_HASH)
    assert not auth.check_scramble(good, base64.b64decode(VECTORS[1][0]), REPL_HASH)
    assert not auth.check_scramble(good[:19], salt, REPL_HASH)
    assert not auth.check_scramble(good + b"\0", salt, REPL_HASH)
    flipped = bytes([good[0] ^ 1]) + good[1:]
    assert not auth.check_scramble(flipped, salt, REPL_HASH)


@pytest.mark.parametrize("stored", [None, "", "not base64!", "AAAA", b"short"])
def test_user_without_usable_hash_never_authenticates(stored):
    salt = auth.generate_salt()
    for password in ("", "secret"):
        assert not auth.check_scramble(auth.scramble(salt, password), salt, stored)


def test_guest_empty_password_verifies_against_guest_hash():
    salt = auth.generate_salt()
    assert auth.check_scramble(auth.scramble(salt, ""), salt, GUEST_HASH)


def test_auth_request_bytes_equal_the_applier_capture():
    """The full AUTH packet a 2.6.0 applier sent in the join-subscribe capture."""
    c2s = (WIRE / "join-subscribe" / "conn1-c2s.bin").read_bytes()
    salt = base64.b64decode(VECTORS[0][0])
    packet = auth.encode_auth_request("repl", "secret", salt)
    assert c2s[8:8 + len(packet)] == packet   # after the 8-byte VOTE packet
    row, _ = decode_row(packet, 5, exact=True)
    assert row.type == 7 and row.sync == 0
    assert unpack(row.body) == {0x23: "repl", 0x21: ["chap-sha1", bytes.fromhex(VECTORS[0][2])
                                                     .decode("utf-8", "surrogateescape")]}


def test_auth_body_with_sync_and_bad_scramble_size():
    packet = auth.encode_auth_request("u", "p", b"s" * 20, sync=7)
    row, _ = decode_row(packet, 5, exact=True)
    assert row.sync == 7
    with pytest.raises(ValueError):
        auth.encode_auth_body("u", b"x" * 19)


def test_salt_is_random_and_sized():
    salts = {auth.generate_salt() for _ in range(50)}
    assert len(salts) == 50
    assert all(len(s) == auth.GREETING_SALT_SIZE == 32 for s in salts)


@settings(max_examples=200)
@given(password=st.text(max_size=40) | st.binary(max_size=40),
       other=st.text(min_size=1, max_size=10), salt=st.binary(min_size=20, max_size=63))
def test_scramble_roundtrip(password, other, salt):
    stored = auth.password_hash(password)
    proof = auth.scramble(salt, password)
    assert len(proof) == auth.SCRAMBLE_SIZE
    assert auth.check_scramble(proof, salt, stored)
    wrong = (password + other) if isinstance(password, str) else password + other.encode()
    assert not auth.check_scramble(auth.scramble(salt, wrong), salt, stored)
    # the definition, spelled out
    h1 = hashlib.sha1(password.encode() if isinstance(password, str) else password).digest()
    h2 = hashlib.sha1(h1).digest()
    mask = hashlib.sha1(salt[:20] + h2).digest()
    assert proof == bytes(a ^ b for a, b in zip(h1, mask))
