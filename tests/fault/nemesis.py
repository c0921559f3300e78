"""Faults for the replica-set scenarios, from a seeded schedule.

Process faults act on a node by its PID: kill -9 (then start again), SIGSTOP and
SIGCONT (a hung process: its sockets stay open, nothing is read or answered). Link
faults act on the `Proxy` in front of a node (cut, stall, delay; proxy.py). File
faults damage the last xlog of a node killed with -9, before it starts again:

* a torn tail: the file cut at a seeded offset strictly inside its last block, as a
  crash in the middle of a write leaves it. 2.6.0 starts on it without any option:
  the partial block is dropped ("file `…` wasn't correctly closed") and the instance
  gets the lost rows from its master again;
* a flipped byte inside the last block's payload (after its 19-byte fixheader): the
  block's crc32c no longer matches. 2.6.0 refuses to start ("can't open tx: tx
  checksum mismatch", then "can't initialize storage: tx checksum mismatch") unless
  `force_recovery` is on, which skips the block (the file is left as it is and the
  next write opens a new xlog); the node then re-syncs its rows from the master.
  `flip_and_restart` checks both starts.

`make_schedule` turns a seed into the events of one run: what, on which target, when
(seconds after the workload started) and for how long. The same seed gives the same
events; the run waits for each event's time, applies it, waits its duration and
undoes it. Nothing here asserts on time: `Nemesis.log` records what was done.
"""
from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from spindle.core.xlog.files import XlogReader, list_files
from spindle.core.xlog.format import FIXHEADER_SIZE

from ..integration.cluster import Node, process_gone, wait_for
from .proxy import Proxy
from .qsync_support import pause, resume

LINK_FAULTS = ("cut", "stall", "delay")
NODE_FAULTS = ("pause", "kill", "torn", "flip")
FILE_FAULTS = ("torn", "flip")
ALL_LINKS = "*"             # a link fault's target: every link at once
CORRUPT_ERROR = "E> can't open tx: tx checksum mismatch"
CORRUPT_FATAL = "F> can't initialize storage: tx checksum mismatch"


# ------------------------------------------------------------------ the schedule

@dataclass(frozen=True)
class Event:
    at: float              # seconds after the workload started
    fault: str             # one of LINK_FAULTS or NODE_FAULTS
    target: str            # a link's name or ALL_LINKS (LINK_FAULTS), or a node's name
    duration: float        # how long the fault lasts before it is undone
    param: float = 0.0     # delay: seconds per chunk
    seed: int = 0          # torn/flip: the seed of the damage's offset and byte

    def __str__(self) -> str:
        extra = f" {self.param:.3f}s/chunk" if self.fault == "delay" else ""
        return f"{self.at:6.2f}s {self.fault} {self.target} for {self.duration:.2f}s{extra}"


def make_schedule(seed: int | str, seconds: float, faults: dict[str, list[str]],
                  gap: tuple[float, float] = (0.1, 0.5),
                  duration: tuple[float, float] = (0.2, 1.2)) -> list[Event]:
    """Events one after another over `seconds`, from `random.Random(seed)`.

    `faults` maps a fault to the targets it may hit ({"cut": ["r1", "r2"], ...}).
    Every event ends before the next begins; the last one ends within `seconds`.
    """
    rng = random.Random(f"schedule:{seed}")
    menu = [(fault, target) for fault in sorted(faults) for target in faults[fault]]
    assert menu, "no faults to schedule"
    events: list[Event] = []
    now = rng.uniform(*gap)
    while True:
        fault, target = rng.choice(menu)
        length = rng.uniform(*duration)
        if now + length > seconds:
            break
        param = round(rng.uniform(0.005, 0.1), 3) if fault == "delay" else 0.0
        events.append(Event(round(now, 3), fault, target, round(length, 3), param,
                            rng.getrandbits(32)))
        now += length + rng.uniform(*gap)
    return events


# ------------------------------------------------------------ process faults

def kill9(node: Node) -> None:
    """kill -9 by PID and wait until the process is gone (a stopped one dies too)."""
    pid = node.proc.pid
    node.kill()
    wait_for(lambda: process_gone(pid), 15, f"{node.name} (pid {pid}) to die")


# ---------------------------------------------------------------- file faults

@dataclass
class Damage:
    path: str
    offset: int                 # where the file was cut, or the byte flipped
    block: tuple[int, int]      # the damaged block: offset, size
    lsns: tuple[int, int]       # first and last LSN of the block's rows
    old: int | None = None      # the flipped byte before and after
    new: int | None = None

    def __str__(self) -> str:
        what = (f"flipped byte {self.offset} 0x{self.old:02x}->0x{self.new:02x}"
                if self.old is not None else f"cut at {self.offset}")
        return (f"{Path(self.path).name}: {what} in block {self.block[0]}+{self.block[1]}"
                f" (LSN {self.lsns[0]}..{self.lsns[1]})")


def last_block(workdir: Path):
    """The newest xlog of a stopped node that has a whole block: (path, data, block),
    or None when the newest file has none (nothing to damage there: damaging an older
    file would be a gap, another fault)."""
    files = list_files(str(workdir), ".xlog")
    if not files:
        return None
    path = files[-1].path
    data = Path(path).read_bytes()
    # skipping blocks damaged before: 2.6.0 started with force_recovery goes on
    # writing after a block it skipped, in the same file
    with XlogReader(path, force_recovery=True) as reader:
        blocks = list(reader.blocks())
    if not blocks:
        return None
    return path, data, blocks[-1]


def tear_tail(workdir: Path, rng: random.Random) -> Damage | None:
    """Cut the newest xlog strictly inside its last block."""
    found = last_block(workdir)
    if found is None:
        return None
    path, data, block = found
    cut = rng.randrange(block.offset + 1, block.offset + block.size)
    with open(path, "r+b") as file:
        file.truncate(cut)
    return Damage(path, cut, (block.offset, block.size),
                  (block.rows[0].lsn, block.rows[-1].lsn))


def flip_byte(workdir: Path, rng: random.Random) -> Damage | None:
    """XOR one byte of the last block's payload (never its fixheader: a changed length
    can make a block look torn instead of corrupt, a different fault)."""
    found = last_block(workdir)
    if found is None:
        return None
    path, data, block = found
    at = rng.randrange(block.offset + FIXHEADER_SIZE, block.offset + block.size)
    old = data[at]
    new = old ^ rng.randrange(1, 256)
    with open(path, "r+b") as file:
        file.seek(at)
        file.write(bytes([new]))
    return Damage(path, at, (block.offset, block.size),
                  (block.rows[0].lsn, block.rows[-1].lsn), old, new)


# A node restarted after a fault recovers everything it wrote since its last
# checkpoint before it answers: ~1.5M rows after 60 s of 16 writers, which took
# Spindle 52 s on the busy 2-core machine (a matrix run timed out at the usual 60 s).
RESTART_READY_TIMEOUT = 300.0


def restart_node(node: Node) -> None:
    node.start(wait=False)
    node.wait_ready(RESTART_READY_TIMEOUT)


def wait_exit(node: Node, timeout: float = 60) -> int:
    wait_for(lambda: node.proc.poll() is not None, timeout, f"{node.name} to exit")
    return node.proc.returncode


def flip_and_restart(node: Node, rng: random.Random) -> tuple[Damage | None, str]:
    """kill -9, flip a byte of the last block, then start: without force_recovery the
    start must be refused on the checksum (2.6.0's rule); with it the node must come
    up. Returns the damage and the error line of the refused start.

    The refusal is checked as both kinds print it: exit status 1, the error line
    "can't open tx: tx checksum mismatch" and the fatal one "can't initialize
    storage: tx checksum mismatch" (2.6.0's box_cfg() panic)."""
    kill9(node)
    damage = flip_byte(node.workdir, rng)
    refusal = ""
    if damage is not None and not node.cfg.get("force_recovery"):
        before = len(node.output())
        node.start(wait=False)
        code = wait_exit(node)
        output = node.output()[before:]
        node.stop()
        refusal = next((line for line in output.splitlines() if CORRUPT_ERROR in line), "")
        assert code == 1 and refusal and CORRUPT_FATAL in output, (
            f"{node.name} started on a corrupt last block without force_recovery "
            f"(exit {code}; {damage}):\n{output[-3000:]}")
    node.cfg["force_recovery"] = True
    restart_node(node)
    return damage, refusal


# ------------------------------------------------------------------- the runner

@dataclass
class Nemesis:
    """Applies a schedule in a thread of its own; `stop()` heals whatever is on."""

    nodes: dict[str, Node]
    links: dict[str, Proxy]
    events: list[Event]
    log: list[str] = field(default_factory=list)
    damages: list[Damage] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self):
        # seconds spent waiting for restarted nodes to recover (each wait has its own
        # deadline, RESTART_READY_TIMEOUT): the schedule's bound does not count them
        self.recovery_waits = 0.0
        self._done = threading.Event()
        self._finished = threading.Event()
        self._thread: threading.Thread | None = None
        self._paused: set[str] = set()

    def start(self) -> "Nemesis":
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 120) -> None:
        """End the schedule (the current fault is undone first) and heal everything."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout)
            assert not self._thread.is_alive(), "the nemesis did not finish"
        self.heal_all()
        if self.error is not None:
            raise self.error

    def heal_all(self) -> None:
        for proxy in self.links.values():
            proxy.heal()
        for name in list(self._paused):
            resume(self.nodes[name])
            self._paused.discard(name)
        for node in self.nodes.values():
            if not node.alive():
                restart_node(node)

    def wait_finished(self, timeout: float) -> bool:
        """Until every event has been applied and undone; False at the deadline.
        The deadline is `timeout` from now plus the time restarted nodes spent
        recovering meanwhile: a recovery's length depends on how many rows the
        workload left and on the machine's load, and each has its own deadline."""
        deadline = time.monotonic() + timeout - self.recovery_waits
        while not self._finished.wait(1.0):
            if time.monotonic() > deadline + self.recovery_waits:
                return False
        return True

    @contextlib.contextmanager
    def _recovering(self):
        """Counts the time of the block in `recovery_waits`."""
        began = time.monotonic()
        try:
            yield
        finally:
            self.recovery_waits += time.monotonic() - began

    def _restart(self, node: Node) -> None:
        with self._recovering():
            restart_node(node)

    def _run(self) -> None:
        try:
            for event in self.events:
                if self._done.wait(max(0.0, self._started + event.at - time.monotonic())):
                    return
                self._apply(event)
        except BaseException as exc:      # noqa: BLE001 - re-raised by stop()
            self.error = exc
            self.log.append(f"error: {exc!r}")
        finally:
            self._finished.set()

    def _apply(self, event: Event) -> None:
        """Do the event, hold it for its duration (cut short by stop()), undo it."""
        rng = random.Random(event.seed)
        began = time.monotonic()
        note = str(event)
        if event.fault in LINK_FAULTS:
            proxies = (list(self.links.values()) if event.target == ALL_LINKS
                       else [self.links[event.target]])
            for proxy in proxies:
                if event.fault == "delay":
                    proxy.delay(event.param)
                else:
                    getattr(proxy, event.fault)()
            self._done.wait(event.duration)
            for proxy in proxies:
                proxy.heal()
        else:
            node = self.nodes[event.target]
            if event.fault == "pause":
                pause(node)
                self._paused.add(node.name)
                self._done.wait(event.duration)
                resume(node)
                self._paused.discard(node.name)
            elif event.fault == "kill":
                kill9(node)
                self._done.wait(event.duration)
                self._restart(node)
            elif event.fault == "torn":
                kill9(node)
                damage = tear_tail(node.workdir, rng)
                self._note_damage(damage)
                note += f": {damage or 'no block to tear'}"
                self._done.wait(event.duration)
                self._restart(node)
            elif event.fault == "flip":
                with self._recovering():        # a refused start, then a forced one
                    damage, refusal = flip_and_restart(node, rng)
                self._note_damage(damage)
                note += f": {damage or 'no block to flip'}"
                if refusal:
                    note += f"; refused without force_recovery: {refusal.split(' E> ', 1)[1]}"
            else:
                raise AssertionError(f"unknown fault {event.fault}")
        # when it really began and how long it took (restarts wait for readiness)
        self.log.append(f"{note} [began {began - self._started:.2f}s, "
                        f"took {time.monotonic() - began:.2f}s]")

    def _note_damage(self, damage: Damage | None) -> None:
        if damage is not None:
            self.damages.append(damage)
