"""Running real Tarantool 2.6.0 and Spindle on the same Lua, for side-by-side tests."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SPINDLE = str(Path(sys.executable).with_name("spindle"))


def tarantool_binary() -> str:
    """The oracle must be there: interop tests fail, never skip, without it."""
    path = shutil.which("tarantool")
    assert path, "tarantool 2.6.0 is not installed (./scripts/test installs it)"
    return path


def run_script(binary: str, script: str, cwd: Path, name: str = "probe.lua",
               timeout: float = 30) -> subprocess.CompletedProcess:
    """Write `script` into cwd/name and run `binary name` there."""
    (cwd / name).write_text(script)
    return subprocess.run([binary, name], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def both(script: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess,
                                               subprocess.CompletedProcess]:
    """Run the script in real Tarantool and in Spindle, each in its own directory."""
    (tmp_path / "tarantool").mkdir()
    (tmp_path / "spindle").mkdir()
    real = run_script(tarantool_binary(), script, tmp_path / "tarantool")
    ours = run_script(SPINDLE, script, tmp_path / "spindle")
    return real, ours


def serve_both(script: str, tmp_path: Path, scenario) -> list:
    """Start real Tarantool, then Spindle, as servers running `script` (each in its
    own directory); the results of `scenario(port)` against each, in that order."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
    from box_process import BoxProcess
    results = []
    for name, binary in (("tarantool", tarantool_binary()), ("spindle", SPINDLE)):
        node = BoxProcess(binary, script, tmp_path / name)
        try:
            node.wait_ready()
            results.append(scenario(node.port))
        finally:
            node.stop()
    return results


def console_documents(output: str) -> list[str]:
    """The YAML documents a console printed, without prompts, blank or log lines."""
    lines = [line for line in output.splitlines()
             if line.strip() and not line.startswith("tarantool>") and " I> " not in line]
    return "\n".join(lines).split("...")


def own_home(path: Path) -> dict:
    """The environment with HOME at `path`: Tarantool's console keeps its readline
    history in ~/.tarantool_history and reads and rewrites all of it at every
    statement; shared, it grew to 700 MB over test runs (14 s for 3 statements)."""
    return {**os.environ, "HOME": str(path)}


def console_both(statements: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    """Feed the same statements to Tarantool's console and to Spindle's pipe console,
    each in a fresh directory; return both lists of printed documents."""
    (tmp_path / "t").mkdir()
    (tmp_path / "s").mkdir()
    # (a deadline, not a measure: 2.6.0's console took 57 s over some statement
    # lists on the loaded CI-like machine)
    real = subprocess.run([tarantool_binary(), "-e", "require('console').start() os.exit(0)"],
                          input=statements, cwd=tmp_path / "t", capture_output=True,
                          text=True, timeout=300, env=own_home(tmp_path / "t"))
    ours = subprocess.run([SPINDLE, "-i"], input=statements, cwd=tmp_path / "s",
                          capture_output=True, text=True, timeout=300)
    assert ours.returncode == 0, ours.stderr
    return console_documents(real.stdout), console_documents(ours.stdout)
