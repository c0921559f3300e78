"""`spindle demo`: a three-instance replica set on loopback, the console on the first.

The console attaches only to the instance of its own process (there is no remote
console), so instance demo1 runs here, in the foreground, with the console; demo2 and
demo3 are child processes (`spindle demo.lua` in their directories). All three get
the same generated startup script shape: `box.cfg` with every instance's URI in
`replication` and `replication_connect_quorum = 3`, so they wait for each other and
bootstrap as one replica set; demo1 has the lowest instance_uuid and so is the
bootstrap leader (the ballot rule), which then creates the replication user, a
`demo`/`demo` user with `super` (so connectors, and the tests, can look at any
instance: everything listens on 127.0.0.1 only) and the `demo` space; everyone else
gets them by replication.

Process rules:
* Ports are free ones on 127.0.0.1, picked at start, so a demo never collides with
  anything (another demo included).
* Readiness is a `ready` file each script writes after its box.cfg returns — nothing
  is guessed from time. A deadline bounds the whole start; a child that exits, or the
  deadline, ends the demo at once (even while demo1's box.cfg is still waiting for the
  others), with the log to look at.
* Children run in sessions of their own: Ctrl-C in the console (a `\\watch`, a
  statement) reaches only the foreground process. They are stopped on every way out —
  Ctrl-D, \\quit, os.exit(n), a failed start, an exception — and, should this process
  be killed outright, the kernel terminates them (PR_SET_PDEATHSIG, Linux).
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .demo_children import ChildProcess, Children, StartupFailed, late

INSTANCES = 3             # (at most 9: the fixed uuids below are made of one digit)
DEFAULT_DIR = "var/demo"
START_TIMEOUT = 60.0
POLL_INTERVAL = 0.05
REP_USER, REP_PASSWORD = "rep", "pw"            # the replication URIs' user
TOOL_USER, TOOL_PASSWORD = "demo", "demo"       # for connectors poking at any instance
DATA_SUFFIXES = (".snap", ".xlog", ".inprogress", ".vylog")

USAGE = "spindle demo [--dir DIR] [--keep] [--election] [--timeout SECONDS]"

# --election: the three are candidates (Tarantool 2.6.3's Raft, issue 25). A majority
# quorum, or each would elect itself; a short timeout, so the first election and a
# failover are seen within seconds.
ELECTION_TIMEOUT = 1.0


@dataclass
class DemoInstance:
    number: int
    port: int
    directory: Path

    @property
    def name(self) -> str:
        return f"demo{self.number}"

    @property
    def uri(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def rep_uri(self) -> str:
        return f"{REP_USER}:{REP_PASSWORD}@{self.uri}"

    @property
    def uuid(self) -> str:
        # Fixed, ordered uuids: demo1 wins the bootstrap-leader ballot (lowest uuid
        # among equals), --keep restarts find the uuid their files carry, and the
        # first group (the short uuid of the replication table) tells them apart.
        digit = str(self.number)
        return f"{digit * 8}-{digit * 4}-4{digit * 3}-8{digit * 3}-{digit * 12}"

    @property
    def script_path(self) -> Path:
        return self.directory / "demo.lua"

    @property
    def ready_path(self) -> Path:
        return self.directory / "ready"

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.name}.log"

    @property
    def output_path(self) -> Path:
        """A child's stdout and stderr (what happens before its log is open)."""
        return self.directory / "output.log"


# =================================================================== the plan

def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (all held open at once while picking)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def plan_instances(directory: Path, ports: list[int] | None = None) -> list[DemoInstance]:
    ports = ports or free_ports(INSTANCES)
    return [DemoInstance(number, port, directory / f"demo{number}")
            for number, port in enumerate(ports, start=1)]


def prepare(instances: list[DemoInstance], keep: bool, election: bool = False) -> None:
    """Directories and scripts; a fresh replica set unless `keep` (then the old data
    is recovered and the instances rejoin); with `election`, one that elects its
    leader."""
    for instance in instances:
        instance.directory.mkdir(parents=True, exist_ok=True)
        stale = [instance.ready_path, instance.ready_path.with_suffix(".tmp")]
        if not keep:
            stale += [path for path in instance.directory.iterdir()
                      if path.suffix in DATA_SUFFIXES]
            stale += [instance.log_path, instance.output_path]
        for path in stale:
            path.unlink(missing_ok=True)
        instance.script_path.write_text(instance_script(instance, instances, election))


def lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def election_options(instances: list[DemoInstance]) -> str:
    """box.cfg's lines for a replica set electing its leader: every instance a
    candidate, synchronous writes and votes needing a majority."""
    return f"""\
    election_mode = 'candidate',
    election_timeout = {ELECTION_TIMEOUT:g},
    replication_synchro_quorum = {len(instances) // 2 + 1},
"""


def instance_script(instance: DemoInstance, instances: list[DemoInstance],
                    election: bool = False) -> str:
    replication = ", ".join(lua_string(peer.rep_uri) for peer in instances)
    directory = lua_string(str(instance.directory))
    # with election, only the leader writes: box.once waits (box.ctl.wait_rw) until
    # the bootstrap leader has elected itself (alone in the replica set, its quorum
    # is 1), and the others receive the users with the data they join with
    extra = election_options(instances) if election else ""
    return f"""\
-- Written by `spindle demo`: {instance.name} of a replica set of {len(instances)} on 127.0.0.1.
-- Every instance lists all of them (itself too) in `replication` and waits for all
-- before bootstrapping, so they make one replica set.
box.cfg{{
    listen = {lua_string(instance.uri)},
    replication = {{{replication}}},
    replication_connect_quorum = {len(instances)},
    instance_uuid = {lua_string(instance.uuid)},
    memtx_dir = {directory},
    wal_dir = {directory},
    log = {lua_string(str(instance.log_path))},
{extra}}}

-- box.once's rule: the first instance here (the bootstrap leader) creates the users
-- and the space; the others receive them, and the mark in _schema, by replication.
local function once(key, fn)
    local mark = 'once' .. key
    if box.space._schema:get{{mark}} ~= nil then return end
    box.space._schema:put{{mark}}
    return fn()
end
(box.once or once)('spindle-demo', function()
    box.schema.user.create({lua_string(REP_USER)}, {{password = {lua_string(REP_PASSWORD)}}})
    box.schema.user.grant({lua_string(REP_USER)}, 'replication')
    box.schema.user.create({lua_string(TOOL_USER)}, {{password = {lua_string(TOOL_PASSWORD)}}})
    box.schema.user.grant({lua_string(TOOL_USER)}, 'super')
    box.schema.space.create('demo')
    box.space.demo:create_index('primary')
end)

-- Tell `spindle demo` this instance is up: written whole, then renamed into place.
local ready = {lua_string(str(instance.ready_path))}
local file = assert(io.open(ready .. '.tmp', 'w'))
file:write(tostring(box.info.pid), '\\n')
file:close()
assert(os.rename(ready .. '.tmp', ready))
"""


def child_for(instance: DemoInstance) -> ChildProcess:
    argv = [sys.executable, "-m", "spindle.shell.cli", instance.script_path.name]
    return ChildProcess(instance.name, argv, instance.directory, instance.ready_path,
                        instance.output_path)


def write_state(directory: Path, instances: list[DemoInstance], pids: dict[str, int],
                election: bool = False) -> None:
    """demo.json: who is where, for people and tests (the pids to check are gone)."""
    state = {"election": election, "instances": [
        {"name": i.name, "uri": i.uri, "uuid": i.uuid, "dir": str(i.directory),
         "pid": pids.get(i.name)} for i in instances]}
    (directory / "demo.json").write_text(json.dumps(state, indent=2) + "\n")


def hint(instances: list[DemoInstance], election: bool = False) -> str:
    first, others = instances[0], instances[1:]
    rows = [f"  {first.name}  {first.uri:<16} this console"]
    rows += [f"  {i.name}  {i.uri:<16} user {TOOL_USER}, password {TOOL_PASSWORD}"
             for i in others]
    tries = [("\\watch 1 box.info.replication", "redrawn every second; Ctrl-C stops"),
             ("\\set output table", "then \\watch again: one row per peer"),
             ("box.space.demo:insert{1, 'hello'}", "then watch the lsn move on every peer")]
    if election:
        tries[1] = ("\\set output table", "then \\watch again: who leads, in which term")
        tries[2] = ("box.space.demo:insert{1, 'hello'}", "on the leader (the others are "
                    "read-only)")
        tries.append(("box.cfg{election_mode = 'voter'}", "on the leader: it steps down, "
                      "another is elected"))
    return "\n".join([
        f"A replica set of {len(instances)} Spindle instances is up"
        f"{', electing its leader' if election else ''}; files and logs "
        f"in {first.directory.parent}",
        *rows,
        "Try:",
        *(f"  {code:<35} -- {why}" for code, why in tries),
        f"Ctrl-D (or os.exit()) stops all {len(instances)}.",
        ""])


# ============================================================= the foreground

def _launcher_class():
    """DemoLauncher is built on first use: the Launcher pulls in the Lua runtime,
    which `spindle demo --help` does not need."""
    from spindle.core import log

    from .launcher import Launcher

    class DemoLauncher(Launcher):
        """demo1 in this process, supervising the children while it starts."""

        def __init__(self, first: DemoInstance, children: Children, started_at: float,
                     timeout: float, greeting: str):
            super().__init__(script=str(first.script_path), script_args=[], actions=[],
                             interactive=True)
            self.first, self.children, self.greeting = first, children, greeting
            self.timeout, self.deadline = timeout, started_at + timeout
            self.failure: str | None = None
            self.console_started = False
            self._script_done = False

        def run(self) -> int:
            # Lines logged before box.cfg opens demo1's log go there too, not over
            # the console (box.cfg's `log` then takes over the same file).
            with open(self.first.log_path, "a", buffering=1, encoding="utf-8",
                      errors="replace") as early_log:
                previous = log.set_sink(lambda line: early_log.write(line + "\n"))
                try:
                    status = super().run()
                finally:
                    log.set_sink(previous)   # the process is ending: stderr again
            if self.stop_signal == signal.SIGINT and not self.console_started:
                status = 130   # Ctrl-C before the console was up: the shell's status
            if self.failure is None and not self.console_started and status != 0:
                self.failure = f"{self.first.name} failed to start"
            return 1 if self.failure is not None and status == 0 else status

        def _main(self) -> None:
            self.sched.spawn(self._supervise_start, name="demo")
            super()._main()

        def _supervise_start(self) -> None:
            """While demo1's box.cfg runs (waiting for the others to bootstrap), a
            child that dies or the deadline ends the demo instead of the wait."""
            while not self._script_done and self.failure is None:
                problem = self._problem()
                if problem:
                    self._fail(problem)
                    return
                self.sched.sleep(POLL_INTERVAL)

        def _console(self) -> None:
            self._script_done = True
            if self.failure is not None:   # the loop is stopping: no console
                return
            try:
                self.children.wait_ready(self.deadline, sleep=self.sched.sleep,
                                         interval=POLL_INTERVAL)
            except StartupFailed as exc:
                self._fail(str(exc))
                return
            self.console_started = True
            sys.stderr.write(self.greeting)
            sys.stderr.flush()
            super()._console()

        def _problem(self) -> str | None:
            try:
                self.children.check()
            except StartupFailed as exc:
                return str(exc)
            if time.monotonic() >= self.deadline:
                return late([self.first.name] + self.children.not_ready())
            return None

        def _fail(self, message: str) -> None:
            self.failure = f"{message} ({self.timeout:g} s)" if message.endswith(
                "deadline") else message
            self.sched.stop()

    return DemoLauncher


# ======================================================================= main

def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="spindle demo", usage=USAGE,
        description="Start a local replica set of three Spindle instances and open "
                    "the console on the first; leaving the console stops all three.")
    parser.add_argument("--dir", default=DEFAULT_DIR,
                        help=f"where the instances keep their files (default {DEFAULT_DIR})")
    parser.add_argument("--keep", action="store_true",
                        help="recover the data of the previous demo instead of a fresh start")
    parser.add_argument("--election", action="store_true",
                        help="the instances elect their leader (election_mode = 'candidate'); "
                             "box.info.election shows it")
    parser.add_argument("--timeout", type=float, default=START_TIMEOUT, metavar="SECONDS",
                        help=f"seconds to wait for all three to be up (default {START_TIMEOUT:g})")
    return parser.parse_args(argv)


def lock_directory(directory: Path):
    """Hold DIR/demo.lock for the life of the demo: a second demo on the same files
    would wipe the first one's data. Returns the open lock file, or None if taken."""
    directory.mkdir(parents=True, exist_ok=True)
    lock = open(directory / "demo.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    return lock


def main(argv: list[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    if options.timeout < 0:
        sys.stderr.write("spindle demo: --timeout must not be negative\n")
        return 2
    directory = Path(options.dir).resolve()
    lock = lock_directory(directory)
    if lock is None:
        sys.stderr.write(f"spindle demo: another demo is running in {directory}\n")
        return 1
    with lock:
        return _run(directory, options)


def _run(directory: Path, options: argparse.Namespace) -> int:
    instances = plan_instances(directory)
    prepare(instances, options.keep, options.election)
    children = Children([child_for(instance) for instance in instances[1:]])
    sys.stderr.write(f"spindle demo: starting {', '.join(i.name for i in instances)} "
                     f"in {directory}\n")
    sys.stderr.flush()
    started_at = time.monotonic()
    status = 1
    launcher = None
    try:
        children.start_all()
        pids = {child.name: child.pid for child in children}
        pids[instances[0].name] = os.getpid()
        write_state(directory, instances, pids, options.election)
        launcher = _launcher_class()(instances[0], children, started_at, options.timeout,
                                     hint(instances, options.election))
        status = launcher.run()
    except KeyboardInterrupt:   # Ctrl-C before the console was up
        status = 130
    except OSError as exc:      # a child could not even be started
        _report(f"cannot start the instances: {exc}", instances)
    finally:
        killed = children.stop_all()
        if killed:
            sys.stderr.write(f"spindle demo: killed {', '.join(killed)} "
                             "(did not stop on SIGTERM)\n")
    if launcher is not None and launcher.failure is not None:
        _report(launcher.failure, instances)
    return status


def _report(problem: str, instances: list[DemoInstance]) -> None:
    logs = [instances[0].log_path] + [p for i in instances[1:]
                                      for p in (i.output_path, i.log_path)]
    sys.stderr.write(f"spindle demo: {problem}\nlogs:\n" +
                     "".join(f"  {path}\n" for path in logs if path.exists()))
    sys.stderr.flush()
