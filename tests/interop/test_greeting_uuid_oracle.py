"""The greeting of a socket bound during the first box.cfg carries the instance UUID
the instance then has, as 2.6.0's does: peers that connect while it bootstraps (or
recovers) must not see another one (a 2.6.0 applier that saw another UUID stops
with ER_INSTANCE_UUID_MISMATCH when it reconnects; a Spindle one took the peer for
someone else, and its upstream was missing from box.info.replication)."""
from __future__ import annotations

import re
import socket
import subprocess

import pytest

from spindle.core.instance.box import Box
from spindle.core.fiber import Scheduler

from ..integration.cluster import process_gone, wait_for
from .oracle import SPINDLE, run_script, tarantool_binary

WRITE = "box.cfg{} os.exit(0)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def greeting_uuid(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        data = b""
        while len(data) < 64:
            chunk = sock.recv(128)
            assert chunk, "no greeting"
            data += chunk
    return data[:64].split()[3].decode()


@pytest.mark.parametrize("kind", ["tarantool", "spindle"])
def test_a_bootstrapping_instance_greets_with_its_uuid(tmp_path, kind):
    binary = tarantool_binary() if kind == "tarantool" else SPINDLE
    port, nobody = free_port(), free_port()
    (tmp_path / "x.lua").write_text(
        f"box.cfg{{listen = '127.0.0.1:{port}', replication = {{'127.0.0.1:{port}', "
        f"'127.0.0.1:{nobody}'}}, replication_connect_timeout = 60}}")
    log = open(tmp_path / "out.txt", "wb")
    proc = subprocess.Popen([binary, "x.lua"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        # box.cfg waits for the missing peer meanwhile
        greeted = wait_for(lambda: greeting_uuid(port), 30, "a greeting")
        logged = wait_for(lambda: re.search(r"instance uuid (\S+)",
                                            (tmp_path / "out.txt").read_text()),
                          30, "the instance uuid line").group(1)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(15)
        log.close()
    assert greeted == logged
    assert process_gone(proc.pid)


def test_the_uuid_before_the_box_starts_is_the_one_it_recovers_or_takes(tmp_path):
    """expected_instance_uuid(): the newest snapshot's (work_dir and memtx_dir as
    box.cfg has them), box.cfg's instance_uuid, else one made once that
    bootstrap takes."""
    data = tmp_path / "data"
    data.mkdir()
    assert run_script(SPINDLE, WRITE, data).returncode == 0
    snapshot_uuid = re.search(rb"Instance: (\S+)",
                              next(data.glob("*.snap")).read_bytes()).group(1).decode()
    sched = Scheduler()
    try:
        assert Box(sched).expected_instance_uuid({"work_dir": str(data)}) == snapshot_uuid
        given = "11111111-1111-4111-8111-111111111111"
        assert Box(sched).expected_instance_uuid({"instance_uuid": given}) == given
        fresh = Box(sched)
        made = fresh.expected_instance_uuid({"work_dir": str(tmp_path / "empty")})
        assert made not in (snapshot_uuid, given)
        assert fresh.expected_instance_uuid({}) == made == fresh.greeting_uuid
    finally:
        sched.close()
