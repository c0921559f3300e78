"""The stress scenario (tests/stress/lua_fibers.py) on three seeds under
MALLOC_PERTURB_, each in its own process so a memory error cannot hide."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "stress" / "lua_fibers.py"
COUNT = 1000


def expected() -> dict:
    cancelled = [i for i in range(1, COUNT + 1) if i % 13 == 0]
    failed = [i for i in range(1, COUNT + 1) if i % 11 == 0 and i % 13]
    ok = [i for i in range(1, COUNT + 1) if i % 11 and i % 13]
    nested = [i for i in range(1, COUNT + 1) if i % 7 == 0 and i % 13]
    return {"ok": len(ok), "failed": len(failed), "cancelled": len(cancelled),
            "nested": len(nested), "checksum": sum(ok), "leftover_fibers": 0}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_thousand_lua_fibers_under_malloc_perturb(seed):
    env = dict(os.environ, MALLOC_PERTURB_="165")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(seed), str(COUNT)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected()
