"""The local console's session (issue 24): in 2.6.0 the console of console.start() (a
script's, or the REPL's) runs in a box.session of type 'repl' — made with fd 1 when
the fiber had no session yet, else the fiber's session with its console fd 0 — where
box.session.push() writes the tagged push document (or Lua output's '-- Push') to
that fd before the statement's reply, and session.peer() fails. The same lines are
typed into 2.6.0 and Spindle, through a pipe and on a terminal (pexpect)."""
from __future__ import annotations

import re
import subprocess

import pexpect

from .oracle import SPINDLE, console_documents, own_home, tarantool_binary

STATEMENTS = """\
box.session.type()
box.session.fd()
box.session.push(1)
box.session.push({1, 'a', {b = 2}}), box.session.push(box.NULL), 'END'
box.session.push('a: b'), box.session.push(nil), 'END'
box.session.push()
box.session.push(1, 2)
box.session.id() > 0, box.session.exists(box.session.id()), box.session.user()
box.session.peer()
local f = require('fiber').create(function() _G.t = box.session.type() end) return t
\\set output lua
box.session.push(1), 'END'
box.session.push({a = 1, b = {1, 2}})
box.session.push(nil)
box.session.push(box.NULL)
\\set output lua,block
box.session.push({a = 1, b = {1, 2}})
\\set output yaml
require('console').eval('box.session.type()')
'END'
"""

FRESH = "require('console').start() os.exit(0)\n"

# the fiber has a session before the console: its console fd is 0, a pipe's read end
TOUCHED = """\
local before = box.session.id()
require('console').start()
print('after', box.session.type(), box.session.id() == before, box.session.fd())
print(box.session.push('x'))
os.exit(0)
"""

TOUCHED_STATEMENTS = """\
box.session.type()
box.session.fd()
box.session.push(1)
local ok, e = box.session.push(1) return e.type, e.message, e.errno
\\set output lua
box.session.push(1), 'END'
"""


def _piped(binary: str, script: str, statements: str, cwd) -> subprocess.CompletedProcess:
    cwd.mkdir()
    (cwd / "console.lua").write_text(script)
    return subprocess.run(["timeout", "-s", "KILL", "120", binary, "console.lua"],
                          input=statements, cwd=cwd, capture_output=True, text=True,
                          env=own_home(cwd))


def _both_piped(script: str, statements: str, tmp_path) -> list[subprocess.CompletedProcess]:
    return [_piped(binary, script, statements, tmp_path / name)
            for name, binary in (("tarantool", tarantool_binary()), ("spindle", SPINDLE))]


def test_console_start_session_is_repl_with_push(tmp_path):
    real, ours = _both_piped(FRESH, STATEMENTS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    want = console_documents(real.stdout)
    assert "- repl" in want[0]
    assert "%TAG !push! tag:tarantool.io/push,2018\n--- 1" in real.stdout
    assert "-- Push\n1;" in real.stdout
    assert console_documents(ours.stdout) == want
    # session.peer() of a console on standard input/output: getpeername fails
    for done in (real, ours):
        assert "getpeername: Socket operation on non-socket" in done.stderr


def test_an_existing_session_becomes_repl_with_fd_0(tmp_path):
    real, ours = _both_piped(TOUCHED, TOUCHED_STATEMENTS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert "write, called on fd 0" in real.stdout
    # (2.6.0's last prompt, at the end of input, precedes what the script prints next)
    want = real.stdout.replace("tarantool> after", "after")
    assert "\nafter\trepl\ttrue\t0\n" in want
    assert console_documents(ours.stdout) == console_documents(want)


# each statement's reply ends with its own mark, which the transcript waits for
TYPED = ["box.session.type(), 'E1'", "box.session.fd(), 'E2'",
         "box.session.push({1, 'a'}), 'E3'", "box.session.push('x'), 'E4'"]
YAML_LINE = re.compile(r"^(---|\.\.\.|- |  |%TAG )")


def _on_terminal(binary: str, args: list[str], cwd) -> list[str]:
    """The YAML lines (documents and pushes) a console on a terminal printed for
    TYPED: the echo of the input and the prompts, which differ, are left out."""
    cwd.mkdir()
    (cwd / "console.lua").write_text(FRESH)
    env = {**own_home(cwd), "TERM": "dumb"}
    child = pexpect.spawn(binary, args, cwd=str(cwd), env=env, encoding="utf-8",
                          timeout=30, dimensions=(24, 200))
    transcript = ""
    try:
        child.expect(r"> ")
        for n, line in enumerate(TYPED, 1):
            child.sendline(line)
            child.expect(rf"- E{n}\r?\n\.\.\.")
            transcript += child.before + child.after
        child.sendline("os.exit(0)")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", transcript).replace("\r", "")
    return [line for line in text.splitlines() if YAML_LINE.match(line)]


def test_repl_session_on_a_terminal(tmp_path):
    """console.start() in a script, and the REPL of a bare `tarantool`/`spindle`."""
    for how, args in (("script", ["console.lua"]), ("repl", [])):
        want = _on_terminal(tarantool_binary(), args, tmp_path / f"t-{how}")
        got = _on_terminal(SPINDLE, args, tmp_path / f"s-{how}")
        assert "- repl" in want and "%TAG !push! tag:tarantool.io/push,2018" in want, want
        assert got == want, how
