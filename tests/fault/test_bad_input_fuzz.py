"""Fuzzed requests against a Spindle server: valid requests holding odd values (strings
that are not UTF-8, extensions 2.6.0 cannot read) mutated byte by byte — flipped,
cut short, grown, spliced. Whatever arrives, the answer is an IPROTO reply whose
error, if any, is one Tarantool could give (never a Python exception's text), the
connection keeps serving (a following PING and SELECT work) unless the framing
itself broke, and the server logs no traceback. The mutations come from a seeded
generator: a failure names the request that caused it."""
from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import msgpack

from spindle.core.iproto.msgpack import packb, raw_ext, unpack_exact
from spindle.core.net.protocol import PacketError, decode_packet
from spindle.core.net.requests import REPLICATION_TYPES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
from box_process import SPINDLE, BoxProcess  # noqa: E402

from ..interop.test_bad_input_oracle import Client  # noqa: E402

SCRIPT = """
box.cfg{log_level = 2}
box.schema.user.grant('guest', 'read,write,execute', 'universe', nil, {if_not_exists = true})
local function space(name, format, parts)
    local s = box.schema.space.create(name, {format = format, if_not_exists = true})
    s:create_index('pk', {parts = parts, if_not_exists = true})
    return s
end
space('str', {{'id', 'unsigned'}, {'v', 'string'}}, {1, 'unsigned'})
space('strk', {{'k', 'string'}}, {1, 'string'})
space('nofmt', nil, {1, 'unsigned'})
space('dec', {{'id', 'unsigned'}, {'v', 'decimal'}}, {1, 'unsigned'})
space('deck', {{'k', 'decimal'}}, {1, 'decimal'})
space('uuidk', {{'k', 'uuid'}}, {1, 'uuid'})
space('anyf', {{'id', 'unsigned'}, {'v', 'any'}}, {1, 'unsigned'})
box.space.nofmt:create_index('n', {parts = {2, 'scalar'}, unique = false,
                                   if_not_exists = true})
function echo(...) return ... end
box.cfg{listen = '127.0.0.1:' .. arg[1]}
"""
ODD = ["\udcff\udcfe", "\udcc3", raw_ext(1, b""), raw_ext(1, b"\x00\x1a"),
       raw_ext(1, b"\x27\x1c"), raw_ext(2, b"\x01" * 15), raw_ext(3, b"\x01\x02"),
       raw_ext(42, b"abc"), raw_ext(-5, b"ab"), raw_ext(-1, b"\x01\x02\x03"),
       raw_ext(-1, b"\x00\x00\x00\x01")]
# a Python exception's text: "TypeError: ...", a codec complaint, a struct message
PYTHON_TEXT = re.compile(
    r"\b[A-Z]\w*(Error|Exception|Warning): |Traceback|codec can't|struct\.error|"
    r"object has no attribute|not supported between|NoneType|index out of range|"
    r"positional argument|unhashable|No more data to unpack|invalid literal")
N_REQUESTS = 3000


def seeds() -> list[bytes]:
    """Request packets (header + body, no length) with odd values everywhere."""
    out = []
    for value in ODD:
        for space in range(512, 519):
            out.append(_packet(2, {0x10: space, 0x21: [7, value]}))
            out.append(_packet(1, {0x10: space, 0x11: 0, 0x12: 10, 0x14: 0, 0x20: [value]}))
        out += [
            _packet(3, {0x10: 513, 0x21: [value]}),
            _packet(4, {0x10: 514, 0x20: [7], 0x21: [["=", 1, value], ["+", 1, value]]}),
            _packet(9, {0x10: 514, 0x21: [8, value], 0x28: [["+", 1, value]]}),
            _packet(5, {0x10: 513, 0x11: 0, 0x20: [value]}),
            _packet(10, {0x22: "echo", 0x21: [value, [value], {"k": value}]}),
            _packet(8, {0x27: "return ...", 0x21: [value]}),
        ]
    # a map keyed by an array (Python decodes the key as a tuple to hash it)
    keyed = b"\x81\x92\x01\xa1\xff\x03"
    out += [msgpack.packb({0: 1, 1: 1}) + b"\x85\x10\xcd\x02\x02\x11\x00\x12\x0a\x14\x00"
            + b"\x20\x91" + keyed,
            msgpack.packb({0: 2, 1: 1}) + b"\x82\x10\xcd\x02\x02\x21\x92\x09" + keyed,
            msgpack.packb({0: 10, 1: 1}) + b"\x82\x22\xa4echo\x21\x91" + keyed]
    return out


def _packet(rtype: int, body: dict) -> bytes:
    return msgpack.packb({0: rtype, 1: 1}) + packb(body)


def mutate(rng: random.Random, packet: bytes) -> bytes:
    data = bytearray(packet)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(5)
        pos = rng.randrange(len(data)) if data else 0
        if kind == 0 and data:                       # flip a byte
            data[pos] = rng.randrange(256)
        elif kind == 1:                              # cut short
            del data[pos:]
        elif kind == 2:                              # grow
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif kind == 3 and data:                     # an extension header in the middle
            data[pos:pos] = bytes((rng.choice((0xD4, 0xD5, 0xD6, 0xC7)), rng.randrange(256)))
        else:                                        # a slice of another seed spliced in
            data[pos:pos] = rng.choice(SEEDS)[rng.randrange(8):]
    return bytes(data[:4096])


SEEDS = seeds()


def _replication_request(packet: bytes) -> bool:
    try:
        return decode_packet(packet).route in REPLICATION_TYPES
    except PacketError:
        return False


class Connection(Client):
    """A raw IPROTO client sending whole packets as they are (mutated ones too)."""

    send = Client.send_packet

    def reply(self) -> tuple[int, str | None]:
        """(the reply's type, its error message or None)."""
        header, packet, end = self.read_reply()
        if not header[0] & 0x8000:
            return header[0], None
        body, _ = unpack_exact(packet, end)
        return header[0], body[0x31]


def test_mutated_requests_get_tarantool_answers(tmp_path):
    rng = random.Random(20260521)
    node = BoxProcess(SPINDLE, SCRIPT, tmp_path / "spindle")
    try:
        node.wait_ready()
        conn = Connection(node.port)
        answered = refused = 0
        for number in range(N_REQUESTS):
            packet = mutate(rng, rng.choice(SEEDS))
            if _replication_request(packet):
                continue        # JOIN/SUBSCRIBE/... take the connection over
            conn.send(packet)
            try:
                rtype, message = conn.reply()
            except (EOFError, ConnectionResetError):
                # only a broken length could close it, and ours never is
                raise AssertionError(f"request {number} closed the connection: {packet.hex()}")
            answered += 1
            if message is not None:
                refused += 1
                assert not PYTHON_TEXT.search(message), (number, packet.hex(), message)
            if number % 50 == 0:
                conn.send(_packet(64, {}))
                assert conn.reply() == (0, None)
        for space in range(512, 519):
            conn.send(_packet(1, {0x10: space, 0x11: 0, 0x12: 1000, 0x14: 2, 0x20: []}))
            assert conn.reply() == (0, None)
        conn.close()
        assert answered > N_REQUESTS * 0.9 and 0 < refused < answered
        assert node.proc.poll() is None
    finally:
        node.stop()
    assert "Traceback" not in node.output(), node.output()[-3000:]
