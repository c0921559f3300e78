"""box.ctl.on_shutdown against 2.6.0: the triggers run once, newest first, when the
instance ends by os.exit() or SIGTERM after box.cfg, still `running` (issue 23 item
6). Not compared, because 2.6.0 never exits then: a trigger that raises (Spindle
logs the error and runs the others), and os.exit with a trigger set before box.cfg
(2.6.0 spins)."""
from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.integration.cluster import wait_for

from .oracle import SPINDLE, tarantool_binary

SCRIPT = """
local mode = arg[1]
local function note(text)
    local f = io.open('out', 'a') f:write(text, '\\n') f:close()
end
note('before ' .. #box.ctl.on_shutdown())
box.cfg{listen = '127.0.0.1:0', log_level = 1}
local first = box.ctl.on_shutdown(function() note('first ' .. box.info.status) end)
local replaced = function() note('never') end
box.ctl.on_shutdown(replaced)
box.ctl.on_shutdown(function() note('last ' .. mode) end, replaced)
local list = box.ctl.on_shutdown()
note('set ' .. #list .. ' ' .. tostring(list[1] == first) .. ' ' .. tostring(list[2] == first))
note(tostring(pcall(box.ctl.on_shutdown, 1)))
if mode == 'exit' then os.exit(5) end
note('ready')
"""


def run(binary: str, mode: str, cwd: Path) -> tuple[int, str]:
    (cwd / "s.lua").write_text(SCRIPT)
    proc = subprocess.Popen([binary, "s.lua", mode], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if mode == "term":
            wait_for(lambda: (cwd / "out").exists() and "ready" in (cwd / "out").read_text(),
                     60, "the script")
            proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return status, (cwd / "out").read_text()


@pytest.mark.parametrize("mode", ["exit", "term"])
def test_on_shutdown_as_2_6_0(mode, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "s").mkdir()
    real = run(tarantool_binary(), mode, tmp_path / "t")
    ours = run(SPINDLE, mode, tmp_path / "s")
    assert ours == real
    assert "first running" in real[1] and "never" not in real[1]
