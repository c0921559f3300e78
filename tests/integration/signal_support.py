"""Signal scenarios run against one real instance process (Spindle or Tarantool 2.6.0).

Each `observe_*` function starts a node of the given kind, sends it a signal by PID,
and returns what can be seen from outside: exit status, the log lines, the files.
tests/integration/test_signals.py checks Spindle's observations; the interop test
checks that real Tarantool 2.6.0 observes the same in the same scenario.

Everything waits for a condition with a deadline; nothing sleeps and hopes.
"""
from __future__ import annotations

import os
import re
import signal
import threading
from pathlib import Path

import msgpack
import tarantool

from spindle.core.xlog.files import XlogReader, list_files

from .cluster import Cluster, Node, process_gone, wait_for

EXIT_TIMEOUT = 30.0
SPACE_ID = 600
_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[\d+\] ")
# Where in its C source Tarantool logged a line ("coio say.c:273 !> ..."): Spindle has
# no C source to name.
_C_SOURCE = re.compile(r" [a-z_]+\.cc?:\d+ ")

CREATE_SPACE = (f"box.schema.space.create('t', {{id = {SPACE_ID}}}) "
                "box.space.t:create_index('pk')")


def strip_prefix(line: str) -> str:
    """A log line without its time and pid: "main C> got signal 15 - Terminated"."""
    return _PREFIX.sub("", line)


def log_lines(text: str) -> list[str]:
    return [strip_prefix(line) for line in text.splitlines() if _PREFIX.match(line)]


def send(node: Node, signum: int) -> None:
    assert node.proc is not None
    os.kill(node.proc.pid, signum)


def wait_exit(node: Node) -> int:
    assert node.proc is not None
    return node.proc.wait(EXIT_TIMEOUT)


def xlog_eof_markers(directory: Path) -> list[bool]:
    """For each .xlog of the directory, oldest first: does it end with the EOF marker
    (every block read, then the marker)?"""
    ends = []
    for xfile in list_files(str(directory)):
        with XlogReader(xfile.path) as reader:
            for _ in reader.blocks():
                pass
            ends.append(reader.eof_marker)
    return ends


def xlog_keys(directory: Path) -> set[int]:
    """First fields of the tuples the xlogs of the directory insert into space 600."""
    keys = set()
    for xfile in list_files(str(directory)):
        with XlogReader(xfile.path) as reader:
            for row in reader.rows():
                body = msgpack.unpackb(row.body, strict_map_key=False) if row.body else {}
                if isinstance(body, dict) and body.get(0x10) == SPACE_ID:   # SPACE_ID
                    keys.add(body[0x21][0])                                  # TUPLE
    return keys


def keep_serving(node: Node) -> bool:
    """The process lives and answers: two round trips, so the hub has taken the turns
    a queued signal needs (a process a signal killed refuses the connection)."""
    first = node.eval("return 1")
    second = node.eval("return box.info.status")
    return first == 1 and second == "running" and node.alive()


# ---------------------------------------------------------------- SIGTERM / SIGINT

def observe_stop(cluster: Cluster, kind: str, signum: int, *, pid_file: bool = False,
                 rows: int = 100, ignore_sigint: bool = False) -> dict:
    """Write `rows` rows, stop the instance with `signum`, read its files, restart it."""
    cfg = {"wal_mode": "write"}
    if pid_file:
        cfg["pid_file"] = "instance.pid"
    node = cluster.add(kind, f"{kind}-stop-{signum}-{int(pid_file)}", cfg)
    if ignore_sigint:      # as a shell starts a background job
        node.preexec_fn = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)
    node.start()
    node.eval(CREATE_SPACE + f" for i = 1, {rows} do box.space.t:insert{{i}} end")
    before = len(node.output())
    send(node, signum)
    status = wait_exit(node)
    node.stop()                  # the connection and the output file of the dead process
    observed = {
        "status": status,
        "lines after the signal": log_lines(node.output()[before:]),
        "xlog EOF markers": xlog_eof_markers(node.workdir),
        "keys in the xlogs": len(xlog_keys(node.workdir)),
    }
    node.preexec_fn = None
    node.start()
    observed["rows after restart"] = node.eval("return box.space.t:count()")
    node.stop()
    return observed


# ------------------------------------------------------------------------- SIGHUP

def observe_sighup_with_log_file(cluster: Cluster, kind: str) -> dict:
    """box.cfg{log = 'instance.log'}; logrotate renames the file away and sends SIGHUP."""
    node = cluster.add(kind, f"{kind}-hup-file", {"log": "instance.log"})
    node.start()
    current, rotated = node.workdir / "instance.log", node.workdir / "instance.log.1"
    node.eval("require('log').info('before the rotation')")
    wait_for(lambda: "before the rotation" in current.read_text(), 10, "the first line")
    current.rename(rotated)
    send(node, signal.SIGHUP)
    wait_for(lambda: current.exists() and "reopened" in current.read_text(), 30,
             "a new log file")
    node.eval("require('log').info('after the rotation')")
    wait_for(lambda: "after the rotation" in current.read_text(), 10, "a line after")
    new_lines = log_lines(current.read_text())
    observed = {
        "serving": keep_serving(node),
        "reopen lines in the new file": [line for line in new_lines if "reopen" in line],
        "later line in the new file": any(line.endswith("I> after the rotation")
                                          for line in new_lines),
        "old file got": [line for line in log_lines(rotated.read_text())
                         if "after the rotation" in line or "reopen" in line],
    }
    node.stop()
    return observed


def observe_sighup_on_stderr(cluster: Cluster, kind: str) -> dict:
    """No log file: SIGHUP has nothing to reopen and the instance keeps serving."""
    node = cluster.add(kind, f"{kind}-hup-stderr")
    node.start()
    before = len(node.output())
    send(node, signal.SIGHUP)
    observed = {"serving": keep_serving(node),
                "lines after the signal": log_lines(node.output()[before:])}
    node.stop()
    return observed


def observe_sighup_unopenable(cluster: Cluster, kind: str) -> dict:
    """The directory of the log file went away: the error goes to the file still open
    and the instance keeps serving; once the directory is back a SIGHUP reopens."""
    node = cluster.add(kind, f"{kind}-hup-gone", {"log": "logs/instance.log"})
    logs, moved = node.workdir / "logs", node.workdir / "logs.old"
    logs.mkdir()
    node.start()
    logs.rename(moved)
    send(node, signal.SIGHUP)
    wait_for(lambda: "logrotate" in (moved / "instance.log").read_text(), 30,
             "the error in the old file")
    serving = keep_serving(node)
    errors = [_C_SOURCE.sub(" ", line)
              for line in log_lines((moved / "instance.log").read_text())
              if "logrotate" in line]
    logs.mkdir()
    send(node, signal.SIGHUP)
    wait_for(lambda: (logs / "instance.log").exists() and
             "reopened" in (logs / "instance.log").read_text(), 30, "the new file")
    observed = {"serving": serving and keep_serving(node),
                "errors": [line.replace(str(logs), "<logs>") for line in errors]}
    node.stop()
    return observed


# ------------------------------------------------------------------------ SIGUSR1

def observe_sigusr1(cluster: Cluster, kind: str) -> dict:
    """SIGUSR1 takes a checkpoint: a snapshot at the current vclock appears."""
    node = cluster.add(kind, f"{kind}-usr1")
    node.start()
    node.eval(CREATE_SPACE + " for i = 1, 10 do box.space.t:insert{i} end")
    signature = node.eval("return box.info.signature")
    send(node, signal.SIGUSR1)

    def snapshot_there():
        return any(f.signature == signature
                   for f in list_files(str(node.workdir), ".snap"))
    wait_for(snapshot_there, 30, "a snapshot at the current vclock")
    observed = {"serving": keep_serving(node),
                "snapshot at the vclock": snapshot_there()}
    node.stop()
    return observed


# ------------------------------------------------------------------------ SIGKILL

def observe_kill9(cluster: Cluster, kind: str, *, writers: int = 3,
                  acked_before_kill: int = 300) -> dict:
    """Writers insert with wal_mode = 'write', each remembering what was acknowledged;
    kill -9 lands while they still write; after a restart every acknowledged row must
    be there (the OS page cache survives the kill of a process)."""
    node = cluster.add(kind, f"{kind}-kill9", {"wal_mode": "write"})
    node.start()
    node.eval(CREATE_SPACE)
    acked: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def write(base: int) -> None:
        conn = tarantool.Connection("127.0.0.1", node.port, connect_now=True,
                                    socket_timeout=10, reconnect_max_attempts=0)
        try:
            for i in range(1_000_000):
                if stop.is_set():
                    return
                key = base + i
                conn.insert(SPACE_ID, (key, "x" * 64))
                with lock:
                    acked.append(key)
        except Exception:    # noqa: BLE001 - the kill cuts every writer off
            return
        finally:
            conn.close()

    threads = [threading.Thread(target=write, args=(n * 1_000_000,), daemon=True)
               for n in range(writers)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(acked) >= acked_before_kill, 60, "acknowledged inserts")
        pid = node.proc.pid
        send(node, signal.SIGKILL)
        wait_for(lambda: process_gone(pid), EXIT_TIMEOUT, "the killed process to go")
    finally:
        stop.set()
        for thread in threads:
            thread.join(EXIT_TIMEOUT)
    status = wait_exit(node)
    with lock:
        acknowledged = set(acked)
    node.stop()
    node.start()
    present = set(node.eval("local keys = {} for _, t in box.space.t:pairs() do "
                            "keys[#keys + 1] = t[1] end return keys") or [])
    node.stop()
    return {"status": status,
            "missing after restart": sorted(acknowledged - present),
            "acknowledged at least": len(acknowledged) >= acked_before_kill}
