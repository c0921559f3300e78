"""The command line of `spindle` against `tarantool` 2.6.0's: the same arguments and
standard input to both, the same output and exit status (issue 23, process behaviour).

2.6.0 hangs after reporting a failing -e chunk or -l library (its event loop is not
left), so those cases are checked on Spindle alone: the message as 2.6.0 prints it,
then exit status 1."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .oracle import SPINDLE, tarantool_binary

SCRIPT = "print(arg[0], arg[1], arg[2], #arg)\nprint(...)\n"


def run(binary: str, argv: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([binary, *argv], input=stdin, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def both(argv: list[str], tmp_path: Path, stdin: str = "", files: dict | None = None):
    results = []
    for name, binary in (("tarantool", tarantool_binary()), ("spindle", SPINDLE)):
        cwd = tmp_path / name
        cwd.mkdir()
        (cwd / "adir").mkdir()
        for file, text in (files or {}).items():
            (cwd / file).write_text(text)
        results.append(run(binary, argv, cwd, stdin))
    return results


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


@pytest.mark.parametrize("argv, stdin", [
    (["s.lua", "a", "b"], ""),
    (["s.lua", "-e", "x"], ""),               # options after the script are the script's
    (["-", "p", "q"], SCRIPT),                # standard input as the script, arg[0] '-'
    (["-e", "print('first')"], "print('then stdin')\n"),
    (["-e", "x = 5", "-e", "print(x * 2)"], ""),
    (["-l", "json", "-e", "print(json.encode({1, 'a'}))"], ""),
    (["--", "s.lua", "-i"], ""),
    ([], "print('piped', 1 + 1)\nprint(type(box.cfg))\n"),
    ([], ""),
])
def test_same_output(argv, stdin, tmp_path):
    real, ours = both(argv, tmp_path, stdin, {"s.lua": SCRIPT})
    assert (ours.returncode, ours.stdout) == (real.returncode, real.stdout), ours.stderr
    assert real.returncode == 0


@pytest.mark.parametrize("argv, stdin, status", [
    (["nosuch.lua"], "", 2),
    (["nosuch.lua", "a"], "", 2),
    (["adir"], "", 1),
    (["bad.lua"], "", 1),
    ([], "local x = 1\nerror('boom')\n", 1),
    (["-"], "x = = 1\n", 1),
])
def test_same_failure(argv, stdin, status, tmp_path):
    real, ours = both(argv, tmp_path, stdin, {"bad.lua": "x = = 1\n"})
    assert real.returncode == status
    assert ours.returncode == status, ours.stderr
    # "Can't open script" is on standard output, the Lua errors on standard error
    assert first_line(ours.stdout) == first_line(real.stdout)
    assert first_line(ours.stderr) == first_line(real.stderr)
    assert "Traceback" not in ours.stderr


@pytest.mark.parametrize("argv", [["-j"], ["-x", "s.lua"], ["-e"], ["-i", "-l"], ["-ij"]])
def test_bad_options_exit_64_with_getopts_words(argv, tmp_path):
    real, ours = both(argv, tmp_path)
    assert real.returncode == ours.returncode == 64
    assert ours.stderr.split(":", 1)[1] == real.stderr.split(":", 1)[1]
    assert ours.stdout == real.stdout == ""


@pytest.mark.parametrize("argv, message", [
    (["-e", "error('x')"], "LuajitError: (command line):1: x"),
    (["-l", "nosuchmod"], "LuajitError: module 'nosuchmod' not found:"),
])
def test_a_failing_chunk_or_library_ends_the_process(argv, message, tmp_path):
    ours = run(SPINDLE, argv, tmp_path)
    assert ours.returncode == 1
    assert first_line(ours.stderr) == message
    assert ours.stderr.rstrip().endswith("fatal error, exiting the event loop")


def test_help_and_version(tmp_path):
    for flag in ("-h", "--help"):
        assert "-e EXPR" in run(SPINDLE, [flag], tmp_path).stdout
    for flag in ("-v", "-V", "--version"):
        out = run(SPINDLE, [flag], tmp_path)
        assert out.returncode == 0 and "Tarantool 2.6.0" in out.stdout
