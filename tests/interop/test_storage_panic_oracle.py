"""A first box.cfg whose storage part fails ends the process, as 2.6.0's box_cfg()
does: the error is logged, then 'F> can't initialize storage: <message>', and the
process exits with 1 whatever pcall surrounds box.cfg (option checks come before and
stay Lua errors). Same script on real Tarantool 2.6.0 and on Spindle."""
from __future__ import annotations

import glob
import os
import re
import socket
from pathlib import Path

import pytest

from .oracle import SPINDLE, run_script, tarantool_binary

WRITE = """
box.cfg{}
box.schema.space.create('t') box.space.t:create_index('pk')
for i = 1, 10 do box.space.t:insert{i} end
os.exit(0)
"""
PROBE = """
local ok, err = pcall(box.cfg, %s)
print('pcall returned', ok, err)
os.exit(0)
"""


def fatal_line(stderr: str) -> str | None:
    found = re.findall(r" F> (.*)", stderr)
    return found[-1] if found else None


def flip_last_block(directory: Path) -> None:
    """Flip a byte inside the last block of the xlog that has rows."""
    path = max(glob.glob(str(directory / "*.xlog")), key=os.path.getsize)
    data = bytearray(Path(path).read_bytes())
    data[-12] ^= 0xFF
    Path(path).write_bytes(data)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def outcomes(tmp_path: Path, cfg: str, prepare=None) -> dict:
    found = {}
    for name, binary in (("tarantool", tarantool_binary()), ("spindle", SPINDLE)):
        where = tmp_path / name
        where.mkdir()
        if prepare is not None:
            prepare(binary, where)
        proc = run_script(binary, PROBE % cfg, where, timeout=60)
        found[name] = (proc.returncode, "pcall returned" in proc.stdout,
                       fatal_line(proc.stderr))
    return found


def written_then_flipped(binary: str, where: Path) -> None:
    assert run_script(binary, WRITE, where, name="write.lua").returncode == 0
    flip_last_block(where)


@pytest.mark.parametrize("case", ["corrupt last block", "no replica to join"])
def test_a_failed_storage_start_is_fatal_as_in_2_6_0(tmp_path, case):
    if case == "corrupt last block":
        found = outcomes(tmp_path, "{}", written_then_flipped)
        expected = "can't initialize storage: tx checksum mismatch"
    else:
        found = outcomes(tmp_path, "{replication = '127.0.0.1:%d', "
                                   "replication_connect_timeout = 0.5}" % closed_port())
        expected = ("can't initialize storage: Incorrect value for option 'replication': "
                    "failed to connect to one or more replicas")
    assert found["tarantool"] == (1, False, expected)
    assert found["spindle"] == found["tarantool"]
