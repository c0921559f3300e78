"""What every benchmark here shares: where `spindle` is, and a warm install."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SPINDLE = str(Path(sys.executable).with_name("spindle"))
ROOT = Path(__file__).resolve().parents[2]


def compile_bytecode() -> None:
    """Measure a warm install: bytecode compiled, as scripts/spindle leaves it."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "core"),
                    str(ROOT / "lua"), str(ROOT / "shell")], check=False,
                   stdout=subprocess.DEVNULL)
