"""The 128-byte greeting a server sends right after accepting a connection (iproto.md §1).

    bytes 0..62   "Tarantool 2.6.0 (Binary) <instance uuid>", space padded
    byte  63      "\\n"
    bytes 64..126 base64 of 32 random salt bytes (44 chars), space padded
    byte  127     "\\n"

Parsing accepts what a 2.6.0 applier accepts and refuses the rest with
ER_PROTOCOL "Invalid greeting".
"""
from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from spindle.core.iproto.auth import SCRAMBLE_SIZE
from spindle.core.iproto.constants import IPROTO_GREETING_SIZE, version_id
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.version import TARANTOOL_VERSION

GREETING_SIZE = IPROTO_GREETING_SIZE
GREETING_LINE_SIZE = GREETING_SIZE // 2
PROTOCOL_BINARY = "Binary"

_VERSION = re.compile(rb"(\d+)\.(\d+)\.(\d+)")
_UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_UUID_LEN = 36
_VERSION_TOKEN_MAX = 20       # char version[20] in greeting_decode
_PROTOCOL_LEN_MAX = 32        # GREETING_PROTOCOL_LEN_MAX
_B64_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


@dataclass(frozen=True)
class Greeting:
    version: tuple[int, int, int]
    protocol: str
    uuid: str | None
    salt: bytes

    @property
    def version_id(self) -> int:
        """(major << 16) | (minor << 8) | patch, as Tarantool compares versions."""
        return version_id(*self.version)


def invalid_greeting() -> ClientError:
    return ClientError(ErrorCode.ER_PROTOCOL, "Invalid greeting")


def encode_greeting(instance_uuid: str, salt: bytes, version: str = TARANTOOL_VERSION,
                    protocol: str = PROTOCOL_BINARY) -> bytes:
    """The greeting bytes; `version` is MAJOR.MINOR.PATCH only, as 2.6.0 prints it."""
    line1 = f"Tarantool {version} ({protocol}) {instance_uuid}".encode("ascii")
    line2 = base64.b64encode(salt) if salt else b""
    width = GREETING_LINE_SIZE - 1
    if len(line1) > width or len(line2) > width:
        raise ValueError("greeting line does not fit in 63 bytes")
    return line1.ljust(width) + b"\n" + line2.ljust(width) + b"\n"


def _decode_salt(text: bytes) -> bytes:
    """Tarantool's lenient base64: characters outside the alphabet are skipped,
    decoding stops at the first '='."""
    text = text.split(b"=", 1)[0]
    clean = bytes(c for c in text if c in _B64_ALPHABET)
    if len(clean) % 4 == 1:
        clean = clean[:-1]
    try:
        return base64.b64decode(clean + b"=" * (-len(clean) % 4))
    except (binascii.Error, ValueError):
        return b""


def decode_greeting(data: bytes) -> Greeting:
    """Parse a greeting as 2.6.0's greeting_decode() does; anything it refuses
    raises ER_PROTOCOL "Invalid greeting". Protocols other than Binary are
    returned without UUID and salt (the caller decides whether it can use them)."""
    h = GREETING_LINE_SIZE
    if (len(data) != GREETING_SIZE or not data.startswith(b"Tarantool ")
            or data[h - 1] != 0x0A or data[GREETING_SIZE - 1] != 0x0A):
        raise invalid_greeting()
    line = bytes(data[:h])
    pos = _skip_spaces(line, len("Tarantool "))
    vend = line.find(b" ", pos)
    if vend < 0 or vend - pos >= _VERSION_TOKEN_MAX:
        raise invalid_greeting()
    match = _VERSION.match(line, pos, vend)
    if match is None:
        raise invalid_greeting()
    version = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    if max(version) > 255:
        raise invalid_greeting()
    new_format = version_id(*version) >= version_id(1, 6, 7)
    pos = _skip_spaces(line, vend + 1)
    instance_uuid = None
    if line[pos:pos + 1] == b"(":
        close = line.find(b")", pos + 1)
        if close < 0 or close - pos - 1 > _PROTOCOL_LEN_MAX:
            raise invalid_greeting()
        protocol = line[pos + 1:close].decode("ascii", "replace")
        pos = close + 1
        if protocol != PROTOCOL_BINARY:
            return Greeting(version, protocol, None, b"")
        if new_format:
            if line[pos:pos + 1] != b" ":
                raise invalid_greeting()
            pos = _skip_spaces(line, pos + 1)
            candidate = line[pos:pos + _UUID_LEN]
            if len(candidate) < _UUID_LEN or not _UUID.fullmatch(candidate):
                raise invalid_greeting()
            instance_uuid = candidate.decode("ascii").lower()
    elif new_format:
        raise invalid_greeting()
    else:
        protocol = PROTOCOL_BINARY     # < 1.6.7 did not name the protocol
    salt = _decode_salt(bytes(data[h:GREETING_SIZE - 1]))
    if not SCRAMBLE_SIZE <= len(salt) < h:
        raise invalid_greeting()
    return Greeting(version, protocol, instance_uuid, salt)


def _skip_spaces(line: bytes, pos: int) -> int:
    while pos < len(line) and line[pos] == 0x20:
        pos += 1
    return pos
