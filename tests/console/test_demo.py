"""`spindle demo`: three real instances, the console on the first, all stopped on exit.

The demo writes var/demo/demo.json (names, URIs, pids) as soon as its children are
started; the tests read the pids from it and check that every one of them is gone
after the demo ends — on Ctrl-D, on os.exit(n), and on a failed start.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import tarantool

from ..integration.cluster import process_gone, wait_for

SPINDLE = str(Path(sys.executable).parent / "spindle")

START_TIMEOUT = 90.0       # three instances bootstrapping together
REPLICATION_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


wait_until = wait_for


def demo_state(directory: Path) -> dict:
    return json.loads((directory / "demo.json").read_text())


def pids_of(directory: Path) -> dict[str, int]:
    return {item["name"]: item["pid"] for item in demo_state(directory)["instances"]}


def start_demo(spawn_console, tmp_path: Path, *args: str):
    directory = tmp_path / "var" / "demo"
    console = spawn_console("demo", "--dir", str(directory), *args, cwd=str(tmp_path),
                            wait_prompt=False)
    return console, directory


def wait_demo_up(console) -> None:
    console.expect_literal("A replica set of 3 Spindle instances is up",
                           timeout=START_TIMEOUT)
    console.expect_literal(console.PROMPT, timeout=START_TIMEOUT)


def assert_all_gone(pids: dict[str, int]) -> None:
    wait_until(lambda: all(process_gone(pid) for pid in pids.values()),
               timeout=STOP_TIMEOUT, what=f"all of {pids} to be gone")


def test_demo_starts_three_instances_and_ctrl_d_stops_them_all(spawn_console, tmp_path):
    console, directory = start_demo(spawn_console, tmp_path)
    wait_demo_up(console)
    pids = pids_of(directory)
    assert sorted(pids) == ["demo1", "demo2", "demo3"]
    assert pids["demo1"] == console.child.pid          # the console's own instance
    for name, pid in pids.items():
        assert not process_gone(pid), name
        assert (directory / name / "ready").exists(), name
        assert (directory / name / "demo.lua").exists(), name
    assert console.run("box.info.uuid") == "- 11111111-1111-4111-8111-111111111111\n"
    assert console.run("box.space.demo ~= nil") == "- true\n"
    # A second demo on the same files refuses to start (it would wipe them).
    second = subprocess.run([SPINDLE, "demo", "--dir", str(directory)], cwd=tmp_path,
                            text=True, capture_output=True, timeout=30)
    assert second.returncode == 1
    assert "another demo is running" in second.stderr
    assert all(not process_gone(pid) for pid in pids.values())
    console.send("\x04")
    assert console.wait_exit(STOP_TIMEOUT) == 0
    assert_all_gone(pids)


def test_demo_os_exit_stops_all_with_its_status(spawn_console, tmp_path):
    console, directory = start_demo(spawn_console, tmp_path)
    wait_demo_up(console)
    pids = pids_of(directory)
    console.send("os.exit(3)\r")
    assert console.wait_exit(STOP_TIMEOUT) == 3
    assert_all_gone(pids)


def test_demo_stops_everyone_when_an_instance_fails_to_start(spawn_console, tmp_path):
    directory = tmp_path / "var" / "demo"
    (directory / "demo3").mkdir(parents=True)
    (directory / "demo3" / "00000000000000000000.snap").write_text("not a snapshot\n")
    console, directory = start_demo(spawn_console, tmp_path, "--keep")   # keeps it
    console.expect(r"spindle demo: demo3 exited with status 1", timeout=START_TIMEOUT)
    assert console.wait_exit(STOP_TIMEOUT) == 1
    assert "demo3/output.log" in console.text
    assert_all_gone(pids_of(directory))


def test_demo_stops_everyone_at_the_deadline(spawn_console, tmp_path):
    console, directory = start_demo(spawn_console, tmp_path, "--timeout", "0")
    console.expect(r"spindle demo: [a-z0-9, ]+ not up by the deadline \(0 s\)",
                   timeout=START_TIMEOUT)
    assert console.wait_exit(STOP_TIMEOUT) == 1
    assert_all_gone(pids_of(directory))


def test_demo_help_does_not_start_anything(tmp_path):
    result = subprocess.run([SPINDLE, "demo", "--help"], cwd=tmp_path, text=True,
                            capture_output=True, timeout=30)
    assert result.returncode == 0
    assert "--keep" in result.stdout and "--timeout" in result.stdout
    assert "--election" in result.stdout
    assert not (tmp_path / "var").exists()


# ============================================================ end to end

def upstream_statuses(node) -> list[str]:
    """The status of each of `node`'s upstreams (every peer but itself), sorted."""
    statuses = node.eval(
        "local r = {} for id, peer in pairs(box.info.replication) do "
        "if id ~= box.info.id then table.insert(r, peer.upstream and "
        "peer.upstream.status or 'none') end end return r").data[0]
    return sorted(statuses)


def test_demo_replica_set_follows_everywhere(spawn_console, tmp_path):
    """All three instances see both of their upstreams in `follow`, a row inserted in
    the console reaches the other two, and the console's table shows it live."""
    console, directory = start_demo(spawn_console, tmp_path)
    wait_demo_up(console)
    pids = pids_of(directory)
    nodes = {}
    try:
        for item in demo_state(directory)["instances"]:
            host, port = item["uri"].rsplit(":", 1)
            nodes[item["name"]] = tarantool.Connection(
                host, int(port), user="demo", password="demo", connect_now=True,
                socket_timeout=10, reconnect_max_attempts=0)
        for name, node in nodes.items():
            try:
                wait_until(lambda: upstream_statuses(node) == ["follow", "follow"],
                           timeout=REPLICATION_TIMEOUT,
                           what=f"{name}'s two upstreams to follow")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; box.info.replication of {name}: "
                                     f"{node.eval('return box.info.replication').data}")
        assert console.run("box.space.demo:insert{1, 'hello'}") == "- [1, 'hello']\n"
        for name in ("demo2", "demo3"):
            wait_until(lambda: nodes[name].select("demo", 1).data == [[1, "hello"]],
                       timeout=REPLICATION_TIMEOUT, what=f"the row on {name}")
        assert console.run("\\set output table") == "- true\n"
        console.send("\\watch 0.2 count=2 box.info.replication\r")
        console.expect(r"#2/2")
        console.prompt()
        assert len(re.findall(r"\x1b\[32mfollow", console.raw)) >= 2
    finally:
        for node in nodes.values():
            node.close()
    console.send("\x04")
    assert console.wait_exit(STOP_TIMEOUT) == 0
    assert_all_gone(pids)


def test_demo_election_shows_the_leader_in_the_console(spawn_console, tmp_path):
    """`spindle demo --election`: three candidates elect a leader; box.info.election
    is in the \\watch of box.info.replication (a line over the table, a column on the
    leader's row), and follows a new leader when the others step down."""
    console, directory = start_demo(spawn_console, tmp_path, "--election")
    wait_demo_up(console)
    pids = pids_of(directory)
    assert demo_state(directory)["election"] is True
    assert "election_mode = 'candidate'" in (directory / "demo2" / "demo.lua").read_text()
    body = console.run("box.cfg.election_mode, box.cfg.replication_synchro_quorum")
    assert body == "- candidate\n- 2\n"
    demo2 = None
    try:
        item = demo_state(directory)["instances"][1]
        host, port = item["uri"].rsplit(":", 1)
        demo2 = tarantool.Connection(host, int(port), user="demo", password="demo",
                                     connect_now=True, socket_timeout=10,
                                     reconnect_max_attempts=0)
        wait_until(lambda: demo2.eval("return box.info.election.leader").data[0] != 0,
                   timeout=REPLICATION_TIMEOUT, what="a leader")
        assert console.run("\\set output table") == "- true\n"
        console.send("\\watch 0.2 count=2 box.info.replication\r")
        console.expect(r"election: term \d+, leader \d; this instance \(id 1\)")
        console.expect(r"│ id │ uuid\s*│ lsn │ election\s*│ upstream")
        console.expect(r"leader, term \d+")
        console.expect(r"#2/2")
        console.prompt()
        # demo1 and demo3 step down to voters: demo2, the one candidate left, is
        # elected, and the console's view follows
        host, port = demo_state(directory)["instances"][2]["uri"].rsplit(":", 1)
        demo3 = tarantool.Connection(host, int(port), user="demo", password="demo",
                                     connect_now=True, socket_timeout=10,
                                     reconnect_max_attempts=0)
        try:
            demo3.eval("box.cfg{election_mode = 'voter'}")
        finally:
            demo3.close()
        assert console.run("\\set output yaml") == "- true\n"
        assert console.run("box.cfg{election_mode = 'voter'}") == ""
        id2 = demo2.eval("return box.info.id").data[0]   # ids go by join order
        wait_until(lambda: console.run("box.info.election.leader") == f"- {id2}\n",
                   timeout=REPLICATION_TIMEOUT, what="demo1 to see demo2 lead")
        assert console.run("\\set output table") == "- true\n"
        console.send("box.info.replication\r")
        console.expect(rf"leader {id2}; this instance \(id 1\): follower.*\(voter\)")
        console.expect(rf"│  {id2} │ 22222222 │\s*\d+ │ leader, term \d+")
        console.prompt()
    finally:
        if demo2 is not None:
            demo2.close()
    console.send("\x04")
    assert console.wait_exit(STOP_TIMEOUT) == 0
    assert_all_gone(pids)
