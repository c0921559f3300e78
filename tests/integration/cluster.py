"""Replica sets of real processes on loopback: Spindle and Tarantool 2.6.0 nodes side by side.

A `Node` is one instance started from a generated script: `box.cfg{listen = <free
port>, ...cfg}` and then, where the instance is writable, guest gets `super` (so the
official connector can eval without a password) and a user `rep` / `pw` gets the
`replication` role. Replicas receive both grants through replication.

Everything waits for a condition with a deadline (`wait_for`), never for a fixed
time; every node is stopped by its test (`Cluster` as a context manager stops all).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import tarantool

from .box_process import free_port

SPINDLE = str(Path(sys.executable).with_name("spindle"))
READY_TIMEOUT = 60.0
REP_USER, REP_PASSWORD = "rep", "pw"

_BOOT = """
pcall(function()
    box.schema.user.grant('guest', 'super', nil, nil, {if_not_exists = true})
    box.schema.user.create('rep', {password = 'pw', if_not_exists = true})
    box.schema.user.grant('rep', 'replication', nil, nil, {if_not_exists = true})
end)
"""


def tarantool_path() -> str:
    path = shutil.which("tarantool")
    assert path, "tarantool 2.6.0 is not installed (./scripts/test installs it)"
    return path


def lua_value(value: Any) -> str:
    """A Python value as a Lua literal (cfg tables of the generated scripts)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(lua_value(v) for v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{lua_value(k)}] = {lua_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no Lua literal for {value!r}")


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition",
             interval: float = 0.05) -> Any:
    """Poll `condition` until it returns something truthy; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except Exception as exc:       # noqa: BLE001 - retried until the deadline
            last_error = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}"
                                 + (f" (last error: {last_error!r})" if last_error else ""))
        time.sleep(interval)


def process_gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


class Node:
    def __init__(self, kind: str, workdir: Path, name: str, cfg: dict | None = None,
                 port: int | None = None, extra_lua: str = ""):
        assert kind in ("spindle", "tarantool"), kind
        self.kind = kind
        self.name = name
        self.workdir = workdir / name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.cfg = dict(cfg or {})
        self.extra_lua = extra_lua
        self.preexec_fn: Callable[[], Any] | None = None   # run in the child before exec
        self.binary: str | None = None     # another build than `kind` says (2.6.3)
        self.proc: subprocess.Popen | None = None
        self._conn: tarantool.Connection | None = None
        self._log = None

    # ------------------------------------------------------------ addresses

    @property
    def uri(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def rep_uri(self) -> str:
        return f"{REP_USER}:{REP_PASSWORD}@127.0.0.1:{self.port}"

    # ------------------------------------------------------------ lifecycle

    def script(self) -> str:
        cfg = {"listen": self.uri, **self.cfg}
        body = ", ".join(f"{k} = {lua_value(v)}" for k, v in cfg.items())
        return f"box.cfg{{{body}}}\n{_BOOT}\n{self.extra_lua}\n"

    def start(self, wait: bool = True) -> "Node":
        (self.workdir / "init.lua").write_text(self.script())
        binary = self.binary or (SPINDLE if self.kind == "spindle" else tarantool_path())
        self._log = open(self.workdir / "output.log", "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([binary, "init.lua"], cwd=self.workdir,
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=self.preexec_fn)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> "Node":
        """Until the instance answers an eval (box.cfg has returned)."""
        def ready():
            # a process that exited ends the wait at once (wait_for retries errors)
            if self.proc is not None and self.proc.poll() is not None:
                return "exited"
            return self.eval("return box.info.status ~= 'loading'")
        try:
            result = wait_for(ready, timeout, f"{self.name} to be ready")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- {self.name} output:\n{self.output()}") from None
        if result == "exited":
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n"
                                 + self.output())
        return self

    def wait_replication_user(self, timeout: float = READY_TIMEOUT) -> "Node":
        """Until the boot script has made the replication user: wait_ready() can
        return between its guest grant and that (a node made read-only then, by
        an election mode, would never make it)."""
        wait_for(lambda: self.eval(
            "local u = box.space._user.index.name:get('rep') "
            "return u ~= nil and box.space._priv:get{u.id, 'role', 3} ~= nil"), timeout,
            f"the replication user on {self.name}")
        return self

    def output(self) -> str:
        if self._log is not None and not self._log.closed:
            self._log.flush()
        path = self.workdir / "output.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self._close_conn()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self, wait: bool = True) -> "Node":
        self.stop()
        return self.start(wait)

    # ---------------------------------------------------------------- talk

    def _connection(self) -> tarantool.Connection:
        if self._conn is None:
            self._conn = tarantool.Connection("127.0.0.1", self.port, connect_now=True,
                                              socket_timeout=10, reconnect_max_attempts=0)
        return self._conn

    def _close_conn(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:     # noqa: BLE001 - closing a dead connection
                pass
            self._conn = None

    def eval(self, code: str, *args: Any) -> Any:
        """Run Lua on the instance; the first result (None when there is none)."""
        try:
            data = self._connection().eval(code, list(args)).data
        except (tarantool.error.NetworkError, OSError):
            self._close_conn()
            raise
        return data[0] if data else None

    def info(self, field: str | None = None) -> Any:
        return self.eval("return box.info" + (f".{field}" if field else "()"))

    def vclock(self) -> dict[int, int]:
        clock = self.info("vclock") or {}
        return {int(k): v for k, v in clock.items() if int(k) != 0}

    def upstream_status(self, peer_id: int) -> str | None:
        return self.eval("local r = box.info.replication[...] "
                         "return r and r.upstream and r.upstream.status", peer_id)

    def select(self, space: str) -> list:
        return self.eval(f"return box.space.{space}:select()")


class Cluster:
    """Nodes of one test; all stopped on exit."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.nodes: list[Node] = []

    def add(self, kind: str, name: str, cfg: dict | None = None, **kwargs) -> Node:
        node = Node(kind, self.workdir, name, cfg, **kwargs)
        self.nodes.append(node)
        return node

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        for node in self.nodes:
            node.stop()


def same_vclocks(*nodes: Node) -> bool:
    clocks = [node.vclock() for node in nodes]
    return all(clock == clocks[0] for clock in clocks)


def wait_caught_up(replica: Node, master: Node, timeout: float = 30.0,
                   what: str = "the replica to catch up") -> None:
    """Wait until `replica` has everything `master` had when this was called.

    While the master keeps writing, two vclocks read one after the other are
    rarely equal (the master writes between the two looks), so equality is the
    wrong condition: the master's clock is read once, as the target."""
    target = master.vclock()
    wait_for(lambda: all(replica.vclock().get(i, 0) >= lsn for i, lsn in target.items()),
             timeout, what)
