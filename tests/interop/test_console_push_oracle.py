"""box.session.push() in a console session (console.listen) against Tarantool 2.6.0:
the same lines on both consoles' sockets give the same bytes — each push a YAML
document tagged !push! (or '-- Push' and the value in Lua output) written before the
statement's reply, push returning true; its usage errors; background sessions."""
from __future__ import annotations

import pytest

from .console_harness import ConsoleNode, RawClient, both_running
from .oracle import SPINDLE, both, tarantool_binary

# (line, marker ending the whole reply): 'END' marks the statement's own reply, after
# the push documents (which end in '\n...\n' or ';' too)
LINES = [
    (b"box.session.push(1), 'END'\n", b"- END\n...\n"),
    (b"box.session.push({1, 'a', {b = 2}}), box.session.push({}), 'END'\n",
     b"- END\n...\n"),
    (b"box.session.push(nil), box.session.push(box.NULL), 'END'\n", b"- END\n...\n"),
    (b"box.session.push('a: b'), box.session.push('x\\ny'), 'END'\n", b"- END\n...\n"),
    (b"box.session.push({a = {1, 2}}), box.session.push(12345678901234567890ULL), "
     b"box.session.push(1.5), 'END'\n", b"- END\n...\n"),
    (b"box.session.push()\n", b"\n...\n"),
    (b"box.session.push(1, 2)\n", b"\n...\n"),
    (b"box.session.push('x', 'y', 'z')\n", b"\n...\n"),
    (b"require('console').eval('box.session.push(5)'), 'END'\n", b"- END\n...\n"),
    (b"for i = 1, 3 do box.session.push(i) end return 'END'\n", b"- END\n...\n"),
    (b"\\set output lua\n", b";"),
    (b"box.session.push(1), 'END'\n", b'"END";'),
    (b"box.session.push({1, 'a', {b = 2}}), 'END'\n", b'"END";'),
    (b"box.session.push(box.NULL), box.session.push('str'), box.session.push(true), "
     b"'END'\n", b'"END";'),
    (b"box.session.push(nil)\n", b";"),
    (b"\\set output lua,block\n", b";"),
    (b"box.session.push({1, {a = 2}}), 'END'\n", b'"END";'),
    (b"\\set output lua,line\n", b";"),
    (b"box.session.push({1, {a = 2}}), 'END'\n", b'"END";'),
    (b"\\set output yaml\n", b"\n...\n"),
    (b"box.session.push('back in yaml'), 'END'\n", b"- END\n...\n"),
]


def _transcript(target) -> list[bytes]:
    client = RawClient(target)
    try:
        return [client.ask(line, marker) for line, marker in LINES]
    finally:
        client.close()


def test_console_push_writes_what_tarantool_writes():
    with both_running() as nodes:
        real, ours = [_transcript(node.sock) for node in nodes]
    for (line, _), want, got in zip(LINES, real, ours):
        assert got == want, line
    assert b"%TAG !push! tag:tarantool.io/push,2018\n--- 1\n...\n---\n- true\n- END" in real[0]


def test_console_push_over_tcp():
    with both_running() as nodes:
        replies = [RawClient(node.tcp).ask(b"box.session.push({x = 1}), 'END'\n",
                                           b"- END\n...\n") for node in nodes]
    assert replies[1] == replies[0]


def test_push_outside_a_console_and_its_usage(tmp_path):
    real, ours = both("""
print(pcall(box.session.push))
print(pcall(box.session.push, 1))
print(pcall(box.session.push, 1, 2))
print(pcall(box.session.push, 1, 2, 3))
print(pcall(box.session.push, nil))
print(pcall(box.session.push, box.NULL))
""", tmp_path)
    assert real.returncode == 0, real.stderr
    assert (ours.returncode, ours.stdout) == (0, real.stdout)


CONNECTED_LINES = [(b"box.session.push(1), 'END'\n", b"\n...\n"),
                   (b"\\set output lua\n", b";"), (b"box.session.push(2), 'END'\n", b";"),
                   (b"\\set output yaml\n", b"\n...\n"), (b"'after'\n", b"\n...\n")]


@pytest.mark.parametrize("target_kind", ["tarantool", "spindle"])
def test_pushes_of_a_connected_peer_reach_the_client(target_kind):
    """console.connect from a console socket: the peer's pushes pass on to that
    socket's client before the reply, as 2.6.0's console passes them on."""
    target = ConsoleNode(tarantool_binary() if target_kind == "tarantool" else SPINDLE)
    streams = []
    try:
        for client_binary in (tarantool_binary(), SPINDLE):
            client = ConsoleNode(client_binary)
            try:
                raw = RawClient(client.tcp)
                raw.ask(f"require('console').connect('127.0.0.1:{target.tcp}')\n".encode())
                streams.append(b"".join(raw.ask(line, marker)
                                        for line, marker in CONNECTED_LINES))
                raw.close()
            finally:
                client.stop()
    finally:
        target.stop()
    assert streams[1] == streams[0]
    assert b"-- Push\n2;" in streams[0]
