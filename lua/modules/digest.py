"""Tarantool's `digest` module (lua/modules/digest.lua). The hashes are the libraries'
(crc32c, mmh3, hashlib, base64); the SHA/MD digests and aes256cbc are crypto's
(lua/modules/crypto.py), as in 2.6.0. pbkdf2 runs in a helper thread while its
fiber waits, as 2.6.0 runs it in a coio thread."""
from __future__ import annotations

import base64
import binascii
import hashlib
import importlib
import os
import re
import sys

from spindle.core.fiber.coio import run_in_thread

from ..runtime import read_source
from .crypto import lua_bytes, primitives

# 2.6.0's base64 encoder breaks its lines after 72 characters
_LINE = 72
# what its decoder reads: both alphabets; everything else ('=' too) is skipped
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/_-]")
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")


def _library(name: str):
    """crc32c or mmh3, imported at the first hash that needs it: importing crc32c
    loads importlib.metadata and argparse (its command line), which a script that
    never computes a CRC should not pay for at start."""
    found = sys.modules.get(name)
    if found is None:
        found = importlib.import_module(name)
    return found


def crc32_update(crc: int, data, length=None) -> int:
    """2.6.0's crc32_calc: CRC-32C from `crc`, with neither the usual inversion
    on the way in nor on the way out (the library applies both: undo them)."""
    crc32c = _library("crc32c")
    return crc32c.crc32c(lua_bytes(data, length), value=int(crc) ^ 0xFFFFFFFF) ^ 0xFFFFFFFF


def base64_encode(data: bytes, nopad: bool, nowrap: bool, urlsafe: bool) -> bytes:
    if urlsafe:
        text = base64.urlsafe_b64encode(data)
        nopad = nowrap = True
    else:
        text = base64.b64encode(data)
    if nopad:
        text = text.rstrip(b"=")
    if not nowrap and len(text) > _LINE:
        text = b"\n".join(text[at:at + _LINE] for at in range(0, len(text), _LINE))
    return text


def base64_decode(text: bytes) -> bytes:
    """Every character out of the alphabets is skipped ('=' as well); a last group
    of 2 or 3 characters gives its whole bytes, a single one none."""
    text = _NOT_BASE64.sub(b"", text).translate(_TO_STANDARD)
    if len(text) % 4 == 1:
        text = text[:-1]
    try:
        return base64.b64decode(text + b"=" * (-len(text) % 4))
    except binascii.Error:     # pragma: no cover - the text was made valid above
        return b""


def murmur_new(seed: int):
    return _library("mmh3").mmh3_32(seed=seed & 0xFFFFFFFF)


def murmur_update(state, data, length=None) -> None:
    state.update(lua_bytes(data, length))


def murmur_result(state) -> int:
    return state.uintdigest()


def murmur(seed: int, data, length=None) -> int:
    if length is None:
        return _library("mmh3").hash(data, seed & 0xFFFFFFFF, signed=False)
    state = murmur_new(seed)        # (mmh3.hash takes no view of memory)
    state.update(lua_bytes(data, length))
    return state.uintdigest()


def build(instance):
    runtime = instance.runtime
    sched = instance.sched

    def pbkdf2(password: bytes, salt: bytes, iterations: float, length: float):
        iterations, length = int(iterations), int(length)
        if iterations <= 0 or length < 0:
            return None     # PKCS5_PBKDF2_HMAC refuses them: 2.6.0 answers nil
        if length == 0:
            return b""
        return run_in_thread(sched, hashlib.pbkdf2_hmac, "sha256", password, salt,
                             iterations, length)

    bridge = runtime.bridge
    natives = runtime.table({
        "crc32_update": bridge(crc32_update, convert_args=False),
        "base64_encode": bridge(base64_encode, convert_args=False),
        "base64_decode": bridge(base64_decode, convert_args=False),
        "urandom": bridge(lambda n: os.urandom(int(n)), convert_args=False),
        "murmur": bridge(murmur, convert_args=False),
        "murmur_new": bridge(murmur_new, convert_args=False),
        "murmur_update": bridge(murmur_update, convert_args=False),
        "murmur_result": bridge(murmur_result, convert_args=False),
        "murmur_copy": bridge(lambda state: state.copy(), convert_args=False),
        "pbkdf2": pbkdf2,      # through wait(): it blocks its fiber, not the others
    })
    crypto = runtime.globals.package.loaded[b"crypto"]
    chunk = runtime.load(read_source("modules/digest.lua"), "@digest.lua")
    return chunk(natives, crypto, primitives(instance).raw, runtime.wait)
