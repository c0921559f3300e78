"""A checker over a long history of synchronous writes while the replica is killed
(-9) and restarted again and again.

Clients (threads, one IPROTO connection each) insert unique keys into an `is_sync`
space of a Spindle master with quorum 2; each write's outcome is what the client
saw: success, ER_SYNC_QUORUM_TIMEOUT / ER_SYNC_ROLLBACK, or unknown (a broken
connection — the master is never killed, so none is expected). Meanwhile a chaos
thread kills or stops the only replica and starts it again. At the end the replica
catches up and the checker asserts: no acknowledged write is lost on either node,
no failed write is visible on either.

Size: SPINDLE_QSYNC_WRITES writes (default 10,000; ~30 s on 2 cores),
SPINDLE_QSYNC_CLIENTS client threads (default 8).
"""
from __future__ import annotations

import itertools
import os
import random
import threading
import time

import tarantool

from ..integration.cluster import Cluster, same_vclocks, wait_for
from .qsync_support import start_master, start_replica, synchro_queue_len, wait_follow

WRITES = int(os.environ.get("SPINDLE_QSYNC_WRITES", "10000"))
CLIENTS = int(os.environ.get("SPINDLE_QSYNC_CLIENTS", "8"))
SYNCHRO_TIMEOUT = 0.5


class History:
    def __init__(self, total: int):
        self.total = total
        self._keys = itertools.count(1)
        self._lock = threading.Lock()
        self.outcome: dict[int, object] = {}      # key -> "ok", an error code, "unknown"

    def next_key(self) -> int | None:
        with self._lock:
            key = next(self._keys)
        return key if key <= self.total else None

    def record(self, key: int, outcome) -> None:
        with self._lock:
            self.outcome[key] = outcome

    def count(self, outcome) -> int:
        with self._lock:
            return sum(1 for value in self.outcome.values() if value == outcome)


def client(port: int, history: History, errors: list) -> None:
    try:
        conn = tarantool.Connection("127.0.0.1", port, socket_timeout=30,
                                    reconnect_max_attempts=0)
    except Exception as exc:   # noqa: BLE001 - reported by the test
        errors.append(exc)
        return
    try:
        while (key := history.next_key()) is not None:
            try:
                conn.insert("sync", (key,))
                history.record(key, "ok")
            except tarantool.error.DatabaseError as exc:
                history.record(key, exc.args[0])
            except (tarantool.error.NetworkError, OSError):
                history.record(key, "unknown")
                return
    finally:
        conn.close()


def chaos(replica, done: threading.Event, rng: random.Random, rounds: list) -> None:
    while not done.is_set():
        if done.wait(rng.uniform(0.1, 0.5)):
            return
        how = "stop" if len(rounds) % 3 == 2 else "kill"
        replica.kill() if how == "kill" else replica.stop()
        done.wait(rng.uniform(0.1, 0.6))
        replica.start()
        rounds.append(how)


def test_no_acknowledged_write_lost_no_failed_write_visible(tmp_path):
    rng = random.Random(os.environ.get("SPINDLE_QSYNC_SEED", "5"))
    with Cluster(tmp_path) as cluster:
        master = start_master(cluster, "spindle", quorum=2, timeout=SYNCHRO_TIMEOUT)
        replica = start_replica(cluster, "spindle", master)
        history = History(WRITES)
        errors: list = []
        rounds: list = []
        done = threading.Event()
        clients = [threading.Thread(target=client, args=(master.port, history, errors))
                   for _ in range(CLIENTS)]
        disturber = threading.Thread(target=chaos, args=(replica, done, rng, rounds))
        started = time.monotonic()
        for thread in clients:
            thread.start()
        disturber.start()
        for thread in clients:
            thread.join(600)
        done.set()
        disturber.join(60)
        elapsed = time.monotonic() - started
        assert not errors, errors
        if not replica.alive():
            replica.start()
        wait_follow(replica, timeout=60)
        wait_for(lambda: same_vclocks(master, replica), 60, "the replica to catch up")

        outcome = history.outcome
        acked = {key for key, value in outcome.items() if value == "ok"}
        failed = {key for key, value in outcome.items() if value in (216, 217)}
        others = {value for value in outcome.values() if value not in ("ok", 216, 217)}
        print(f"{len(outcome)} writes in {elapsed:.1f} s: {len(acked)} acknowledged, "
              f"{len(failed)} failed; replica disturbed {len(rounds)} times ({rounds})")
        assert len(outcome) == WRITES and not others, others
        assert acked and rounds
        for node in (master, replica):
            keys = set(node.eval(
                "local keys = {} for _, t in box.space.sync:pairs() do "
                "keys[#keys + 1] = t[1] end return keys"))
            lost = acked - keys
            visible = failed & keys
            assert not lost, f"{node.name} lost acknowledged writes {sorted(lost)[:20]}"
            assert not visible, f"{node.name} shows failed writes {sorted(visible)[:20]}"
            assert synchro_queue_len(node) == 0
