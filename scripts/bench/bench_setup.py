"""What every benchmark here shares: where `spindle` is, and a warm install."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

SPINDLE = str(Path(sys.executable).with_name("spindle"))
ROOT = Path(__file__).resolve().parents[2]


def compile_bytecode() -> None:
    """Measure a warm install: bytecode compiled, as scripts/spindle leaves it."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "core"),
                    str(ROOT / "lua"), str(ROOT / "shell")], check=False,
                   stdout=subprocess.DEVNULL)


def print_side_by_side(results: dict[str, dict[str, float]], value_format: str = ",.1f"
                       ) -> None:
    """One row per benchmark: Spindle, Tarantool and their ratio."""
    width = max(len(name) for name in results["spindle"]) + 2
    print(f"{'benchmark':{width}} {'Spindle':>12} {'Tarantool':>12} {'ratio':>8}")
    for name, ours in results["spindle"].items():
        theirs = results["tarantool"][name]
        ratio = f"{ours / theirs:.2f}" if theirs else "-"
        print(f"{name:{width}} {ours:12{value_format}} {theirs:12{value_format}} {ratio:>8}")


def run_lua(binary: str, code: str, cwd: str | None = None, timeout: float = 1800) -> float:
    """Run `binary -e code` (in `cwd`, or a fresh temporary directory) and return the
    number its last output line prints."""
    if cwd is None:
        with tempfile.TemporaryDirectory() as tmp:
            return run_lua(binary, code, tmp, timeout)
    proc = subprocess.run([binary, "-e", code], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary}: {proc.stderr[-800:]}")
    return float(proc.stdout.strip().splitlines()[-1])
