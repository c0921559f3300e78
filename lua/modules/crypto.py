"""Tarantool's `crypto` module (lua/modules/crypto.lua): digests, HMACs and ciphers.

The work is hashlib's, hmac's and cryptography's; Lua checks the arguments and keeps
2.6.0's objects and errors. 2.6.0 runs on the platform's OpenSSL 3, which refuses
MD4 (hashlib tells whether this one does) and DES (refused always: cryptography has
no single DES either); its failures read as OpenSSL's error queue makes them read
(OpenSSLErrors). The digest module (lua/modules/digest.lua) uses the same primitives.
"""
from __future__ import annotations

import collections
import ctypes
import functools
import hashlib
import hmac

from spindle.core.iproto.errors import BoxError

from ..runtime import Multi, read_source

DIGESTS = ("md4", "md5", "ripemd160", "sha1", "sha224", "sha256", "sha384", "sha512")

# OpenSSL 3's packed error codes and texts, as ERR_error_string_n prints them
UNSUPPORTED = "error:0308010C:digital envelope routines::unsupported"
INIT_ERROR = "error:03000086:digital envelope routines::initialization error"
WRONG_FINAL_BLOCK = "error:1C80006B:Provider routines::wrong final block length"
BAD_DECRYPT = "error:1C800064:Provider routines::bad decrypt"

# what a refused algorithm leaves in the queue: fetching MD4 fails twice (the
# fetch, then the init), DES once
_REFUSED_DIGEST = (UNSUPPORTED, INIT_ERROR)
_REFUSED_CIPHER = (UNSUPPORTED,)

# each cipher's key size (its IV size is the block's, 0 in ECB: crypto.lua)
CIPHERS = {"aes128": 16, "aes192": 24, "aes256": 32, "des": 8, "none": 0}


@functools.cache
def _ciphers():
    """cryptography's cipher classes, imported at the first cipher: a script that
    only hashes (digest, crypto.digest) does not pay for loading them at start."""
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    try:    # CFB and OFB left the main modes for the "decrepit" ones in cryptography 47
        from cryptography.hazmat.decrepit.ciphers import modes as old_modes
    except ImportError:     # pragma: no cover - an older cryptography
        old_modes = modes   # type: ignore[misc]
    chained = {"cbc": modes.CBC, "cfb": old_modes.CFB, "ofb": old_modes.OFB}
    return padding, Cipher, algorithms, modes, chained


class CryptoError(BoxError):
    type = "CryptoError"


class OpenSSLErrors:
    """OpenSSL's per-thread error queue as 2.6.0 reads it: each failure adds its
    errors at the end, the message is the oldest one, taken off (ERR_get_error);
    nobody clears the rest. So a script that met a refused MD4 sees its second
    error in the next failure's message, as on 2.6.0."""

    def __init__(self) -> None:
        self.queue: collections.deque[str] = collections.deque()

    def fail(self, errors: tuple[str, ...]) -> str:
        self.queue.extend(errors)
        return self.queue.popleft()


def lua_bytes(data, length=None):
    """The bytes of a Lua string: as passed (a copy made by lupa), or, for a large
    one that Lua passes as its address and length (crypto.lua's `raw`), a view of
    the string's own memory, which lives while the synchronous call that reads it
    runs (Lua holds the string as an argument). Saves copying it whole."""
    if length is None:
        return data
    return memoryview((ctypes.c_char * int(length)).from_address(int(data))).cast("B")


def _new_hash(algo: str):
    """A hashlib object, or None when the platform's OpenSSL refuses `algo`."""
    try:
        return hashlib.new(algo)
    except ValueError:
        return None


class Primitives:
    """The Python functions crypto.lua and digest.lua call. Lua strings arrive as
    bytes (the bridges do not convert them)."""

    def __init__(self) -> None:
        self.errors = OpenSSLErrors()
        self.raw = None     # crypto.lua's raw(s), for digest.lua

    # ---------------------------------------------------------------- digests

    def digest(self, algo: bytes, data, length=None):
        """One-shot digest: (bytes) or (nil, OpenSSL's message)."""
        hasher = _new_hash(algo.decode())
        if hasher is None:
            return Multi((None, self.errors.fail(_REFUSED_DIGEST)))
        hasher.update(lua_bytes(data, length))
        return hasher.digest()

    def digest_new(self, algo: bytes):
        hasher = _new_hash(algo.decode())
        if hasher is None:
            return Multi((None, self.errors.fail(_REFUSED_DIGEST)))
        return hasher

    def hmac_new(self, algo: bytes, key: bytes):
        if _new_hash(algo.decode()) is None:
            return Multi((None, self.errors.fail(_REFUSED_DIGEST)))
        return hmac.new(key, digestmod=algo.decode())

    def hmac(self, algo: bytes, key: bytes, data, length=None):
        if _new_hash(algo.decode()) is None:
            return Multi((None, self.errors.fail(_REFUSED_DIGEST)))
        return hmac.digest(key, lua_bytes(data, length), algo.decode())

    @staticmethod
    def update(hasher, data, length=None) -> None:
        hasher.update(lua_bytes(data, length))

    @staticmethod
    def result(hasher) -> bytes:
        return hasher.digest()

    # ---------------------------------------------------------------- ciphers

    def cipher(self, algo: bytes, mode: bytes, encrypt: bool, data: bytes, key: bytes,
               iv: bytes):
        """One-shot encryption or decryption (PKCS#7 padding in ECB and CBC, as
        OpenSSL's EVP does by default); the sizes were checked by Lua."""
        name, mode_name = algo.decode(), mode.decode()
        if name == "none":
            return data
        padding, Cipher, algorithms, modes, chained = _ciphers()
        padded = mode_name in ("ecb", "cbc")
        mode_object = modes.ECB() if mode_name == "ecb" else chained[mode_name](iv)
        engine = Cipher(algorithms.AES(key), mode_object)
        if encrypt:
            if padded:
                padder = padding.PKCS7(128).padder()
                data = padder.update(data) + padder.finalize()
            encryptor = engine.encryptor()
            return encryptor.update(data) + encryptor.finalize()
        if padded and (not data or len(data) % 16):
            raise CryptoError("OpenSSL error: " + self.errors.fail((WRONG_FINAL_BLOCK,)))
        decryptor = engine.decryptor()
        plain = decryptor.update(data) + decryptor.finalize()
        if not padded:
            return plain
        unpadder = padding.PKCS7(128).unpadder()
        try:
            return unpadder.update(plain) + unpadder.finalize()
        except ValueError:
            raise CryptoError("OpenSSL error: " + self.errors.fail((BAD_DECRYPT,))) from None

    @staticmethod
    def fail(message: bytes) -> None:
        raise CryptoError(message.decode("utf-8", "surrogateescape"))

    def refuse_cipher(self) -> None:
        """DES, which OpenSSL 3 (2.6.0's on this platform) refuses at init."""
        raise CryptoError("OpenSSL error: " + self.errors.fail(_REFUSED_CIPHER))

    def lua_table(self, runtime):
        bridge = runtime.bridge
        return runtime.table({
            "digest": bridge(self.digest, convert_args=False),
            "digest_new": bridge(self.digest_new, convert_args=False),
            "hmac": bridge(self.hmac, convert_args=False),
            "hmac_new": bridge(self.hmac_new, convert_args=False),
            "update": bridge(self.update, convert_args=False),
            "result": bridge(self.result, convert_args=False),
            "cipher": bridge(self.cipher, convert_args=False),
            "fail": bridge(self.fail, convert_args=False),
            "refuse_cipher": bridge(self.refuse_cipher, convert_args=False),
        })


def primitives(instance) -> Primitives:
    """The instance's primitives (one OpenSSL error queue for crypto and digest)."""
    found = getattr(instance, "_crypto_primitives", None)
    if found is None:
        found = Primitives()
        instance._crypto_primitives = found
    return found


def build(instance):
    runtime = instance.runtime
    chunk = runtime.load(read_source("modules/crypto.lua"), "@crypto.lua")
    shared = primitives(instance)
    module, shared.raw = chunk(shared.lua_table(runtime),
                               runtime.table({name: size for name, size in CIPHERS.items()}))
    return module
