"""console.listen on Spindle against Tarantool 2.6.0: the same script on both, the same
bytes on the console socket (unix and TCP), tarantoolctl connect / enter on a pty."""
from __future__ import annotations

import subprocess
import time

import pexpect
import pytest
from .console_harness import ConsoleNode, RawClient, both_running, clean_transcript

from .oracle import SPINDLE, both

# (line sent, marker that ends the reply: after \set output lua replies end with ';')
PROTOCOL = [
    (b"1 + 1\n", b"\n...\n"),
    (b"\n", b"\n...\n"),
    (b"'a', nil, {1, {b = 2}}\n", b"\n...\n"),
    (b"box.session.type(), box.session.user(), box.session.exists(box.session.id())\n",
     b"\n...\n"),
    (b"(require('fiber').name():gsub('%d+$', 'N')), (box.session.peer():gsub('%d+$', 'N'))"
     b", box.session.fd() > 0\n", b"\n...\n"),
    (b"local a = \n", b"\n...\n"),                 # a line is a statement: no continuation
    (b"error({1})\n", b"\n...\n"),
    (b"error(nil)\n", b"\n...\n"),
    (b"error('boom')\n", b"\n...\n"),
    (b"box.error(box.error.ILLEGAL_PARAMS, 'x')\n", b"\n...\n"),
    (b"x = 5 return x\r\n", b"\n...\n---\n...\n"),  # CR ends the line, LF an empty one
    (b"\\set output foo\n", b"\n...\n"),
    (b"\\set output table\n", b"\n...\n"),
    (b"\\set output lua,wide\n", b"\n...\n"),
    (b"\\set language foo\n", b"\n...\n"),
    (b"\\set language\n", b"\n...\n"),
    (b"\\set\n", b"\n...\n"),
    (b"\\set foo\n", b"\n...\n"),
    (b"\\foo  bar\n", b"\n...\n"),
    (b"\\\n", b"\n...\n"),
    (b"\\help\n", b"\n...\n"),
    (b"\\set delimiter !\n", b"\n...\n"),
    (b"1 +\n2!\n", b"\n...\n"),
    (b"\\set delimiter\n!\n", b"\n...\n"),
    (b"require('console').delimiter()\n", b"\n...\n"),
    (b"require('console').eos()\n", b"\n...\n"),
    (b"require('console').eval('1, 2')\n", b"\n...\n"),
    (b"\\s o lua\n", b";"),
    (b"1, 'two', nil, {3}\n", b";"),
    (b"\n", b";"),
    (b"error('x')\n", b";"),
    (b"require('console').eos()\n", b";"),
    (b"\\set output lua,block\n", b";"),
    (b"{1, {a = 2}}\n", b";"),
    (b"\\set output yaml\n", b"\n...\n"),
    (b"require('console').delimiter('$EOF$')\n", b"\n...\n"),
    (b"\\set delimiter x$EOF$\n", b"\n...\n"),
    (b"require('console').delimiter('')$EOF$\n", b"\n...\n"),
    (b"~.\n", b"<EOF>"),
]


def _protocol_transcript(target) -> list[bytes]:
    client = RawClient(target)
    replies = [client.greeting]
    try:
        for line, marker in PROTOCOL:
            replies.append(client.ask(line, marker))
    finally:
        client.close()
    return replies


@pytest.mark.parametrize("over", ["unix", "tcp"])
def test_console_protocol_as_tarantool(over):
    with both_running() as nodes:
        real, ours = ([_protocol_transcript(n.sock if over == "unix" else n.tcp)
                       for n in nodes])
    for (line, _), want, got in zip([(b"greeting", b"")] + PROTOCOL, real, ours):
        assert got == want, line


def test_session_is_console_admin_and_triggers_run():
    script = (
        "local console = require('console')\n"
        "events = {}\n"
        "box.session.on_connect(function() table.insert(events, 'connect ' .. "
        "box.session.type()) end)\n"
        "box.session.on_auth(function(u, ok) table.insert(events, 'auth ' .. u .. ' ' .. "
        "tostring(ok)) end)\n"
        "box.session.on_disconnect(function() table.insert(events, 'disconnect') end)\n"
        "console.listen('unix/:' .. arg[1] .. '/%(name)s.control')\n"
        "console.listen('127.0.0.1:' .. arg[2])\n")
    results = []
    with both_running(script=script) as nodes:
        for node in nodes:
            first = RawClient(node.tcp)
            first.ask(b"x = 1\n")
            first.close()
            time.sleep(0.3)
            second = RawClient(node.sock)
            results.append((second.ask(b"events\n"),
                            second.ask(b"box.session.user(), box.session.type()\n")))
            second.close()
    assert results[1] == results[0]


def _tarantoolctl(node: ConsoleNode, args: list[str], lines: list[str]) -> str:
    child = pexpect.spawn("tarantoolctl", args, cwd=str(node.dir), env=node.env(),
                          encoding="utf-8", timeout=15, dimensions=(24, 200))
    transcript = ""
    try:
        child.expect(r"> ")
        transcript += child.before + child.after
        for line in lines:
            child.sendline(line)
            child.expect(r"\n[^\n]*> ")
            transcript += child.before + child.after
        child.sendline("\\q")
        child.expect(pexpect.EOF)
        transcript += child.before
    finally:
        child.close(force=True)
    return clean_transcript(transcript, node)


TYPED = ["1 + 1", "box.session.type()", "\\set output lua", "{1, 'a', nil}",
         "\\set output lua,block", "{x = {1}}", "\\set output yaml", "error('boom')",
         "local x = 1", "nothing_here()", "\\set language foo", "\\set delimiter ;",
         "'the end'"]


@pytest.mark.parametrize("how", ["tcp", "unix"])
def test_tarantoolctl_connect_as_tarantool(how):
    transcripts = []
    with both_running() as nodes:
        for node in nodes:
            target = f"127.0.0.1:{node.tcp}" if how == "tcp" else node.sock
            transcripts.append(_tarantoolctl(node, ["connect", target], TYPED))
    assert transcripts[1] == transcripts[0]
    assert "- console" in transcripts[1]


def test_tarantoolctl_enter_as_tarantool():
    transcripts = []
    with both_running() as nodes:
        for node in nodes:
            transcripts.append(_tarantoolctl(node, ["enter", node.name], TYPED))
    assert transcripts[1] == transcripts[0]
    assert "connected to unix/:SOCK" in transcripts[1]


def test_tarantoolctl_connect_with_piped_statements():
    outputs = []
    with both_running() as nodes:
        for node in nodes:
            done = subprocess.run(["timeout", "-s", "KILL", "30", "tarantoolctl", "connect",
                                   f"127.0.0.1:{node.tcp}"], input="1 + 2\n", cwd=node.dir,
                                  env=node.env(), capture_output=True, text=True)
            outputs.append((done.returncode, done.stdout))
    assert outputs[1] == outputs[0]


def test_bad_input_leaves_the_server_serving():
    """Garbage bytes, a client gone in the middle of a statement, an erroring
    statement: other sessions carry on, and new ones get served."""
    with ConsoleNode(SPINDLE) as node:
        bystander = RawClient(node.tcp)
        assert bystander.ask(b"bystander = 'here'\n") == b"---\n...\n"
        garbage = RawClient(node.sock)
        noise = bytes(b for b in range(256) if b not in b"\r\n") * 4
        reply = garbage.ask(noise + b"\n")
        assert reply.startswith(b"---\n- error: ") and reply.endswith(b"\n...\n")
        # LuaJIT takes bytes past 0x7f for letters: an unknown global
        assert garbage.ask(b"\xff\xfe\n") == b"---\n- null\n...\n"
        assert garbage.ask(b"'\xc3\xa9t\xc3\xa9'\n") == "---\n- été\n...\n".encode()
        garbage.send(b"\x00" * 100000)             # no end of line yet
        assert bystander.ask(b"1\n") == b"---\n- 1\n...\n"
        garbage.close()
        leaving = RawClient(node.tcp)
        leaving.send(b"require('fiber').sleep(0.3) done = true\n")
        leaving.close()                            # gone before the reply
        assert bystander.ask(b"error('bad')\n") == b"---\n- error: bad\n...\n"
        time.sleep(0.6)
        assert bystander.ask(b"done, bystander\n") == b"---\n- true\n- here\n...\n"
        fresh = RawClient(node.tcp)
        assert fresh.ask(b"2 + 2\n") == b"---\n- 4\n...\n"
        fresh.close()
        bystander.close()
        assert node.proc.poll() is None
        assert "Traceback" not in node.output()


MODULE_SCRIPT = """\
local c = require('console')
local fio = require('fio')
local function show(...) print(select('#', ...), ...) end
local checks = {
    function() return c.delimiter() end,
    function() return c.delimiter(1) end,
    function() return c.ac(true) end,
    function() return c.connect('localhost:1') end,
    function() return c.eos() end,
    function() return c.eos('x') end,
    function() return c.on_start(1) end,
    function() return c.on_client_disconnect('x') end,
    function() return c.on_start(nil) end,
    function() return c.listen('x') end,
    function() return c.listen({}) end,
    function() return c.set_default_output('foo') end,
    function() return c.set_default_output('lua,wide') end,
    function() return c.set_default_output() end,
    function() return c.get_default_output(1) end,
    function() return c.eval('1, nil') end,
    function() return c.eval() end,
    function() return c.eval(5) end,
    function() return c.eval('\\\\set output lua') end,
    function() return c.eval('{1, 2}') end,
    function() return c.eos() end,
    function() return c.eval('\\\\set output yaml') end,
}
for _, f in ipairs(checks) do show(pcall(f)) end
c.set_default_output('lua,block')
local out = c.get_default_output()
print(out.fmt, out.opts, out == c.get_default_output())
local path = fio.pathjoin(fio.cwd(), 'c.sock')
local s = c.listen('unix/:' .. path)
print(s:name().host, s:name().port == path, s:name().family, tostring(s):match('^fd %d+, aka unix/:') ~= nil)
show(pcall(c.listen, 'unix/:' .. path))
print(fio.path.exists(path), s:close(), fio.path.exists(path))
local t = c.listen('127.0.0.1:0')
local port = t:name().port
print(t:name().host, port > 0)
local ok, err = pcall(c.listen, '127.0.0.1:' .. port)
print(ok, (err:gsub('%d+: Address', 'PORT: Address')))
t:close()
os.exit(0)
"""


def test_module_functions_as_tarantool(tmp_path):
    real, ours = both(MODULE_SCRIPT, tmp_path)
    assert ours.returncode == real.returncode == 0, ours.stderr
    assert ours.stdout.replace("/spindle/", "/DIR/") == real.stdout.replace("/tarantool/", "/DIR/")
