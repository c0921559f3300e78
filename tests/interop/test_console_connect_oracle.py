"""console.connect and `spindle connect` against Tarantool 2.6.0 and Spindle targets:
a console port (text protocol) and a binary port with credentials."""
from __future__ import annotations

import re
import subprocess
import time

import pexpect
import pytest

from .console_harness import ConsoleNode, RawClient, clean_transcript
from .oracle import SPINDLE, console_documents, own_home, tarantool_binary

LINES = [b"1 + 1\n", b"box.session.type()\n", b"\\set output lua\n", b"{1, 'x', nil}\n",
         b"\\set output yaml\n", b"error('bad')\n", b"nothing()\n",
         b"require('console').delimiter()\n", b"'end'\n",
         b"\\q\n",                 # sent on: a console peer closes, a binary one says null
         b"box.session.type()\n"]


def _targets(target: ConsoleNode) -> dict[str, str]:
    return {"console-tcp": f"127.0.0.1:{target.tcp}",
            "console-unix": target.sock,
            "binary": f"tester:secret@127.0.0.1:{target.bin}",
            "binary-bad-password": f"tester:wrong@127.0.0.1:{target.bin}",
            "closed-port": "127.0.0.1:1"}


def _session(client: ConsoleNode, uri: str) -> list[bytes]:
    """console.connect(uri) typed on a console of `client`, then LINES."""
    raw = RawClient(client.tcp)
    try:
        replies = [raw.ask(f"require('console').connect('{uri}')\n".encode())]
        for line in LINES:
            marker = b";" if line in (b"\\set output lua\n", b"{1, 'x', nil}\n") else b"\n...\n"
            replies.append(raw.ask(line, marker))
        return replies
    finally:
        raw.close()


@pytest.mark.parametrize("target_kind", ["tarantool", "spindle"])
def test_console_connect_from_spindle_as_from_tarantool(target_kind):
    target = ConsoleNode(tarantool_binary() if target_kind == "tarantool" else SPINDLE,
                         binary_port=True)
    try:
        sessions = {}
        for client_binary in (tarantool_binary(), SPINDLE):
            client = ConsoleNode(client_binary)
            try:
                sessions[client.kind] = {name: _session(client, uri)
                                         for name, uri in _targets(target).items()}
            finally:
                client.stop()
    finally:
        target.stop()
    for name in _targets(target):
        assert sessions["spindle"][name] == sessions["tarantool"][name], name
    assert sessions["spindle"]["binary"][2] == b"---\n- binary\n...\n"
    assert sessions["spindle"]["console-tcp"][2] == b"---\n- console\n...\n"


def test_console_connect_needs_a_console():
    script = ("print(pcall(require('console').connect, 'localhost:1'))\n"
              "print(pcall(require('console').delimiter))\nos.exit(0)\n")
    outputs = []
    for binary in (tarantool_binary(), SPINDLE):
        done = subprocess.run(["timeout", "-s", "KILL", "30", binary, "-e", script],
                              capture_output=True, text=True, cwd="/tmp")
        outputs.append(done.stdout)
    assert outputs[1] == outputs[0]


def _spindle_connect(node: ConsoleNode, uri: str, lines: list[str]) -> str:
    child = pexpect.spawn(SPINDLE, ["connect", uri], cwd=str(node.dir),
                          env=dict(node.env(), SPINDLE_HISTORY=str(node.dir / "history")),
                          encoding="utf-8", timeout=15, dimensions=(24, 200))
    transcript = ""
    try:
        child.expect(r"> ")
        transcript += child.before + child.after
        for line in lines:
            child.send(line + "\r")
            child.expect(r"\.\.\.\r?\n|;\r?\n|┘\r?\n")
            transcript += child.before + child.after
        child.send("\\q\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return clean_transcript(transcript, node)


@pytest.mark.parametrize("target_kind", ["tarantool", "spindle"])
@pytest.mark.parametrize("port", ["console", "binary"])
def test_spindle_connect(target_kind, port):
    node = ConsoleNode(tarantool_binary() if target_kind == "tarantool" else SPINDLE,
                       binary_port=True)
    try:
        uri = (f"127.0.0.1:{node.tcp}" if port == "console"
               else f"tester:secret@127.0.0.1:{node.bin}")
        text = _spindle_connect(node, uri, ["1 + 1", "box.session.type()",
                                            "\\set output lua", "{1, 'a'}",
                                            "\\set output yaml", "error('bad')",
                                            "\\set output table", "{{1, 'a'}, {2, 'b'}}"])
    finally:
        node.stop()
    prompt = "HOST:PORT> " if port == "console" else "HOST:BIN> "
    assert f"connected to {prompt[:-2]}" in text and prompt in text
    assert "- 2\n..." in text
    assert ("- console\n" if port == "console" else "- binary\n") in text
    assert '{1, "a"};' in text
    assert "- error: bad\n" in text
    assert re.search(r"col1\s*│\s*col2.*│ 2\s*│ b", text, re.S)   # drawn here


def test_spindle_connect_piped_and_refused():
    node = ConsoleNode(SPINDLE)
    try:
        done = subprocess.run(["timeout", "-s", "KILL", "30", SPINDLE, "connect",
                               f"127.0.0.1:{node.tcp}"], input="x = 40\nx + 2\n",
                              capture_output=True, text=True)
    finally:
        node.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "---\n...\n---\n- 42\n...\n"
    refused = subprocess.run(["timeout", "-s", "KILL", "30", SPINDLE, "connect",
                              "127.0.0.1:1"], input="", capture_output=True, text=True)
    assert refused.returncode == 1
    assert "Connection is not established" in refused.stdout


START_SCRIPT = """\
local console = require('console')
console.on_start(function(self) print('on_start', type(self), self.running)
                                self.running = false end)
console.start()
print('after first')
console.on_start(nil)
console.start()
print('after second')
os.exit(0)
"""


def test_console_start_from_a_script(tmp_path):
    """console.start() reads statements from standard input until its end, then
    the script goes on; on_start runs first and may stop it; a nested start fails."""
    outputs = []
    for binary in (tarantool_binary(), SPINDLE):
        (tmp_path / "start.lua").write_text(START_SCRIPT)
        done = subprocess.run(["timeout", "-s", "KILL", "30", binary, "start.lua"],
                              input="require('console').start()\n2 + 2\n", cwd=tmp_path,
                              capture_output=True, text=True, env=own_home(tmp_path))
        assert done.returncode == 0, done.stderr
        assert done.stdout.rstrip().endswith("after second")
        # tarantool prints it after its prompt, which console_documents drops
        outputs.append(console_documents(done.stdout.replace("after second", "")))
    assert outputs[1] == outputs[0]
    assert "console is already started" in outputs[1][0]


@pytest.mark.parametrize("target_kind", ["tarantool", "spindle"])
@pytest.mark.parametrize("port", ["console", "binary"])
def test_spindle_connect_completes_from_the_peer(target_kind, port):
    """Tab completes names of the peer's Lua state (its completion_handler), which
    the local one has not got."""
    node = ConsoleNode(tarantool_binary() if target_kind == "tarantool" else SPINDLE,
                       binary_port=True)
    try:
        uri = (f"127.0.0.1:{node.tcp}" if port == "console"
               else f"tester:secret@127.0.0.1:{node.bin}")
        child = pexpect.spawn(SPINDLE, ["connect", uri], cwd=str(node.dir),
                              env=dict(node.env(), SPINDLE_HISTORY=str(node.dir / "h")),
                              encoding="utf-8", timeout=15, dimensions=(24, 200))
        try:
            child.expect(r"> ")
            child.send("only_over_there = 41\r")
            child.expect(r"\.\.\.\r?\n")
            child.send("only_over_t")
            child.expect("only_over_t")
            child.send("\t")
            time.sleep(1)                   # the peer answers, the name is completed
            child.send(" + 1\r")           # only only_over_there + 1 makes 42
            child.expect(r"- 42\r?\n\.\.\.")
        finally:
            child.close(force=True)
    finally:
        node.stop()


@pytest.mark.parametrize("port", ["console", "binary"])
def test_peer_gone_ends_the_session_as_tarantoolctl(port):
    """The peer dies: the next statement says 'Peer closed' and the console ends
    (status 0), for tarantoolctl connect and spindle connect alike."""
    endings = []
    for command in (["tarantoolctl", "connect"], [SPINDLE, "connect"]):
        node = ConsoleNode(tarantool_binary(), binary_port=True)
        try:
            uri = (f"127.0.0.1:{node.tcp}" if port == "console"
                   else f"tester:secret@127.0.0.1:{node.bin}")
            child = pexpect.spawn(command[0], command[1:] + [uri], cwd=str(node.dir),
                                  env=dict(node.env(), SPINDLE_HISTORY=str(node.dir / "h")),
                                  encoding="utf-8", timeout=15, dimensions=(24, 200))
            try:
                child.expect(r"> ")
                node.kill()
                child.send("1\r")
                child.expect(pexpect.EOF)
                text = clean_transcript(child.before, node)
                child.close()
                endings.append((child.exitstatus, text[text.index("---"):]))
            finally:
                child.close(force=True)
        finally:
            node.stop()
    assert endings[1] == endings[0] == (0, "---\n- error: Peer closed\n...\n\n")
