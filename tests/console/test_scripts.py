"""`spindle` as a script runner, without a terminal: arg, exit codes, -e, -i, fibers."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SPINDLE = str(Path(sys.executable).parent / "spindle")
TIMEOUT = 20


def run(args: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(cwd))
    process = subprocess.Popen([SPINDLE, *args], cwd=cwd, env=env, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        out, err = process.communicate(stdin, timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_script_sees_arg(tmp_path):
    write(tmp_path, "args.lua",
          "print(arg[0], arg[1], arg[2], arg[-1] ~= nil, #arg)\n"
          "print(...)\n")
    result = run(["args.lua", "a", "b"], tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "args.lua\ta\tb\ttrue\t2"
    assert lines[1] == "a\tb"


def test_os_exit_sets_the_status(tmp_path):
    write(tmp_path, "exit3.lua", "io.stdout:write('before\\n')\nos.exit(3)\nprint('after')\n")
    result = run(["exit3.lua"], tmp_path)
    assert result.returncode == 3
    assert "after" not in result.stdout


def test_a_failing_script_exits_1_with_the_error_as_2_6_0_prints_it(tmp_path):
    write(tmp_path, "fail.lua", "local x = 1\n\nerror('boom')\n")
    result = run(["fail.lua"], tmp_path)
    assert result.returncode == 1
    assert result.stderr == ("LuajitError: fail.lua:3: boom\n"
                             "fatal error, exiting the event loop\n")     # no traceback
    write(tmp_path, "denied.lua", "box.error(box.error.ILLEGAL_PARAMS, 'x')\n")
    result = run(["denied.lua"], tmp_path)
    assert result.stderr.startswith("ER_ILLEGAL_PARAMS: Illegal parameters, x\n")


def test_dash_e_runs_a_chunk(tmp_path):
    result = run(["-e", "print(1)"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n"


def test_dash_i_enters_the_console_after_the_script(tmp_path):
    write(tmp_path, "init.lua", "answer = 6 * 7\n")
    result = run(["-i", "init.lua"], tmp_path, stdin="answer\n")
    assert result.returncode == 0, result.stderr
    assert "- 42" in result.stdout


def test_a_running_fiber_keeps_the_process_alive(tmp_path):
    write(tmp_path, "fiber.lua",
          "local fiber = require('fiber')\n"
          "fiber.create(function() fiber.sleep(0.3) print('fiber done') end)\n"
          "print('script done')\n")
    result = run(["fiber.lua"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["script done", "fiber done"]


def test_version(tmp_path):
    result = run(["--version"], tmp_path)
    assert result.returncode == 0
    assert "Tarantool 2.6" in result.stdout


def test_help(tmp_path):
    result = run(["--help"], tmp_path)
    assert result.returncode == 0
    assert "usage: spindle" in result.stdout
    assert "-e" in result.stdout and "-i" in result.stdout


def test_require_a_module_next_to_the_script(tmp_path):
    scripts = tmp_path / "app"
    scripts.mkdir()
    write(scripts, "greet.lua", "return {hello = function(who) return 'hi ' .. who end}\n")
    write(scripts, "main.lua", "print(require('greet').hello('there'))\n")
    result = run(["app/main.lua"], tmp_path)   # run from elsewhere: the script's dir counts
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hi there\n"


def test_pipe_console_table_output(tmp_path):
    result = run(["-i"], tmp_path, stdin="\\set output table\n{{1, 'a'}, {2, 'b'}}\n")
    assert result.returncode == 0, result.stderr
    assert "col1" in result.stdout and "│ 2" in result.stdout


def test_os_exit_typed_at_the_console_ends_it_quietly(tmp_path):
    done = subprocess.run([SPINDLE, "-i"], input="print(1)\nos.exit(4)\nprint(2)\n", cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 4
    assert done.stdout.splitlines()[0] == "1"
    assert "error" not in done.stdout and "2" not in done.stdout
    assert "Traceback" not in done.stderr


def test_first_box_cfg_log_level_filters_its_own_option_lines(tmp_path):
    """2.6.0 sets the log level before it reports the options: log_level = 2 (error)
    prints no "set 'x' configuration option" line, not even its own."""
    quiet = run(["-e", "box.cfg{log_level = 2, checkpoint_count = 3} os.exit(0)"], tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    (tmp_path / "verbose").mkdir()
    loud = run(["-e", "box.cfg{log_level = 6, checkpoint_count = 3} os.exit(0)"],
               tmp_path / "verbose")
    assert loud.returncode == 0, loud.stderr
    assert "I> set 'log_level' configuration option to 6" in loud.stderr
    assert "I> set 'checkpoint_count' configuration option to 3" in loud.stderr


def test_a_script_start_imports_only_what_it_uses(tmp_path):
    """Cold start: the console, yaml, argparse and package metadata are imported only
    by what needs them, not by a startup script that never uses them."""
    write(tmp_path, "start.lua", "box.cfg{log_level = 2}\nos.exit(0)\n")
    result = subprocess.run([sys.executable, "-X", "importtime", SPINDLE, "start.lua"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "spindle.lua.box" in imported
    unwanted = {"yaml", "spindle.lua.render", "spindle.lua.console", "spindle.shell.link",
                "argparse", "importlib.metadata", "importlib.resources", "prompt_toolkit",
                "rich"}
    assert imported & unwanted == set()


def test_yaml_imported_on_first_use_encodes_and_decodes(tmp_path):
    write(tmp_path, "codec.lua",
          "local yaml = require('yaml')\n"
          "print(yaml.decode('[1, {a: 2}]')[2].a)\n"
          "io.write(yaml.encode({1}))\n")
    result = run(["codec.lua"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2\n---\n- 1\n...\n"
