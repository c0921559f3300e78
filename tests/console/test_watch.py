"""`\\watch SECONDS [count=N] EXPR`: redrawn in place on a terminal until Ctrl-C;
one plain document per tick in pipe mode. Everything waits on what shows up on the
screen or the pipe, with deadlines — never on a fixed sleep."""
from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

SPINDLE = str(Path(sys.executable).parent / "spindle")
TIMEOUT = 20

COUNTER = "(function() n = n + 1 if n == 2 then error('odd ' .. 'tick') end return n end)()"
REPLICATION = ("{[1] = {id = 1, uuid = 'aaaaaaaa-0000-4000-8000-000000000001', lsn = n}, "
               "[2] = {id = 2, uuid = 'bbbbbbbb-0000-4000-8000-000000000002', lsn = 7, "
               "upstream = {status = 'follow', lag = 0.001, idle = 0.25, peer = 'x'}, "
               "downstream = {status = 'stopped', message = 'gone ' .. 'away'}}}")


# ======================================================================= terminal

def test_watch_redraws_in_place_until_ctrl_c(spawn_console):
    console = spawn_console()
    console.run("n = 0")
    console.send(f"\\watch 0.2 {COUNTER}\r")
    console.expect(r"Every 0\.2 s: \(function")
    console.expect(r"- 1\r?\n")
    console.expect(r"odd tick")        # an error is shown, and the watch goes on
    console.expect(r"- 3\r?\n")
    console.expect(r"- 4\r?\n")
    console.send("\x03")
    console.prompt()
    stopped_at = int(console.run("n").strip("- \n"))
    assert stopped_at >= 4
    # Stopped for good: a statement that waits past several periods sees no tick.
    assert console.run("require('fiber').sleep(0.6) return n") == f"- {stopped_at}\n"


def test_ctrl_c_cancels_a_slow_evaluation(spawn_console):
    """The evaluation would sleep an hour: the prompt coming back within the
    console's deadline is the cancellation."""
    console = spawn_console()
    console.send("\\watch 0.5 require('fiber').sleep(3600)\r")
    console.expect(r"Every 0\.5 s")    # drawn before the first value arrives
    console.send("\x03")
    console.prompt()
    assert console.run("1 + 1") == "- 2\n"


def test_count_ends_the_watch_and_table_output_colours_replication(spawn_console):
    console = spawn_console()
    console.run("n = 40")
    assert console.run("\\set output table") == "- true\n"
    console.send(f"\\watch 0.1 count=3 (function() n = n + 1 return {REPLICATION} end)()\r")
    console.expect(r"#3/3")
    console.prompt()                   # back without Ctrl-C
    screen = console.raw
    assert "\x1b[32mfollow" in screen                  # green
    assert "\x1b[1;31mstopped" in screen               # red
    assert "gone away" in console.text
    assert re.search(r"│\s+43 │", console.text)          # the third tick's lsn
    assert console.run("\\set output yaml") == "- true\n"


def test_watch_of_replication_shows_the_election_in_yaml_and_table(spawn_console, tmp_path):
    """A lone candidate elects itself (its quorum is 1): the live view of
    box.info.replication says so over the value; the table adds the column."""
    console = spawn_console()
    console.run(f"box.cfg{{log_level = 1, work_dir = '{tmp_path}', "
                "election_mode = 'candidate', election_timeout = 0.1}")
    console.run("while box.info.election.state ~= 'leader' do "
                "require('fiber').sleep(0.01) end")
    console.send("\\watch 0.1 count=2 box.info.replication\r")
    console.expect(r"election: term \d+, leader 1; this instance \(id 1\): leader, "
                   r"voted for 1 \(candidate\)")
    console.expect(r"- 1:\s+id: 1")            # the YAML value under it
    console.expect(r"#2/2")
    console.prompt()
    assert console.run("\\set output table") == "- true\n"
    console.send("\\watch 0.1 count=1 box.info.replication\r")
    console.expect(r"election: term \d+, leader 1")
    console.expect(r"│  1 │ \w{8} │\s+\d+ │ leader, term \d+")
    console.prompt()
    assert console.run("\\set output yaml") == "- true\n"
    console.run("box.cfg{election_mode = 'off'}")   # off: no election line any more
    start = len(console.text)
    console.send("\\watch 0.1 count=1 box.info.replication\r")
    console.expect(r"#1/1")
    console.prompt()
    assert "election:" not in console.text[start:]


def test_output_of_background_fibers_goes_above_the_value(spawn_console):
    console = spawn_console()
    console.run("fiber = require('fiber')")
    console.run("f = fiber.create(function() for i = 1, 1000 do fiber.sleep(0.1) "
                "print('tick ' .. 'number ' .. i) end end)")
    console.send("\\watch 0.1 fiber.time() > 0\r")
    console.expect(r"tick number \d+\r?\n")
    console.expect(r"- true")
    console.send("\x03")
    console.prompt()
    console.run("f:cancel()")


def test_os_exit_in_the_expression_ends_the_console(spawn_console):
    console = spawn_console()
    console.send("\\watch 0.1 os.exit(5)\r")
    assert console.wait_exit() == 5


def test_help_lists_watch(spawn_console):
    console = spawn_console()
    console.send("\\help\r")
    console.expect_literal("\\watch <seconds> [count=<n>] <expression>")
    console.prompt()


# ====================================================================== pipe mode

def run_pipe(stdin: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(cwd))
    return subprocess.run([SPINDLE, "-i"], input=stdin, cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=TIMEOUT)


def test_pipe_watch_with_count_prints_one_document_per_tick(tmp_path):
    result = run_pipe("n = 0\n\\watch 0.05 count=3 n = n + 1 return n\nprint('after', n)\n",
                      tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("---\n...\n"
                             "---\n- 1\n...\n---\n- 2\n...\n---\n- 3\n...\n"
                             "after\t3\n---\n...\n")


def test_pipe_watch_shows_errors_and_goes_on(tmp_path):
    result = run_pipe("n = 0\n\\watch 0.05 count=3 "
                      "n = n + 1 if n == 2 then error('bad ' .. 'tick', 0) end return n\n",
                      tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("---\n- 1\n...\n---\n- error: bad tick\n...\n"
                                  "---\n- 3\n...\n")


def test_pipe_watch_in_table_output_draws_replication_without_colour(tmp_path):
    result = run_pipe(f"n = 0\n\\set output table\n\\watch 0.05 count=1 {REPLICATION}\n",
                      tmp_path)
    assert result.returncode == 0, result.stderr
    assert "│ upstream │" in result.stdout
    assert "follow" in result.stdout and "stopped" in result.stdout
    assert "\x1b[" not in result.stdout


def test_pipe_watch_bad_lines_are_errors(tmp_path):
    result = run_pipe("\\watch\n\\watch 1\n\\watch 0 x\n\\watch abc x\n"
                      "\\watch 1 count=0 x\n\\watch 1 \\help\n\\watch 1 (\n", tmp_path)
    assert result.returncode == 0, result.stderr
    errors = [line for line in result.stdout.splitlines() if line.startswith("- error")]
    assert len(errors) == 7, result.stdout
    assert "Usage: \\watch <seconds> [count=<n>] <expression>" in errors[0]
    assert "Usage" in errors[1]
    assert "at least 0.01" in errors[2] and "abc" in errors[3]
    assert "count must be a positive integer" in errors[4]
    assert "only Lua can be watched" in errors[5]
    assert "unexpected symbol" in errors[6] or "<eof>" in errors[6]


def test_pipe_watch_without_count_runs_until_more_input(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path))
    process = subprocess.Popen([SPINDLE, "-i"], cwd=tmp_path, env=env, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout],
                              daemon=True)
    try:
        process.stdin.write("n = 0\n\\watch 0.05 n = n + 1 return n\n")
        process.stdin.flush()
        reader.start()
        deadline = time.monotonic() + TIMEOUT
        seen = []
        while "- 5\n" not in seen:     # the watch keeps going while input is quiet
            seen.append(lines.get(timeout=max(0.01, deadline - time.monotonic())))
        process.stdin.write("print('next', n >= 5)\n")   # more input ends the watch
        process.stdin.close()
        assert process.wait(TIMEOUT) == 0
        reader.join(TIMEOUT)
        rest = []
        while not lines.empty():
            rest.append(lines.get())
        assert "next\ttrue\n" in rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_pipe_watch_without_count_stops_at_the_end_of_input(tmp_path):
    result = run_pipe("\\watch 0.05 'once'\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "---\n- once\n...\n"
