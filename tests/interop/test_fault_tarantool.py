"""The fault scenarios of tests/fault with real Tarantool 2.6.0 in every role: a
Tarantool master with Spindle replicas, a Spindle master with Tarantool replicas,
and all Tarantool (the reference: what 2.6.0 itself does under the same faults, the
same seeds and the same checks). Two masters: Spindle beside Tarantool, and both
Tarantool.

A torn or flipped xlog tail hits a replica of either kind; both kinds must start on
a torn tail, refuse a corrupt last block without force_recovery (the error line
"can't open tx: tx checksum mismatch") and start with it, then re-sync from the
master (nemesis.py). Seeds are fixed; the schedule of each is in its comment.
"""
from __future__ import annotations

import dataclasses

import pytest

from ..fault.scenario import Scenario, run
from ..fault.test_replica_set_faults import check_result

# the connector warns of every connection a fault breaks: expected here
pytestmark = pytest.mark.filterwarnings("ignore::tarantool.error.NetworkWarning")

KINDS = {
    "tarantool-master": ("tarantool", "spindle", "spindle"),
    "spindle-master": ("spindle", "tarantool", "tarantool"),
    "all-tarantool": ("tarantool", "tarantool", "tarantool"),
}
WORKLOADS = {
    # kill -9 the master, flip r1 (refused, then force_recovery), torn r2 twice,
    # SIGSTOP r2
    "set-async-crashes": Scenario(faults=("pause", "kill", "torn", "flip"), seconds=6,
                                  seed=8, rate=1000),
    # stall r2, SIGSTOP r1, SIGSTOP r2, cut r1, stall all
    "set-sync-links-pause": Scenario(space="sync", faults=("cut", "stall", "pause"),
                                     seconds=4, seed=16),
    # kill -9 r1, cut all (longer than the synchro timeout), stall r2
    "register": Scenario(workload="register", faults=("cut", "stall", "kill"), seconds=4,
                         seed=22, synchro_timeout=0.5),
}
MASTER_MASTER = {
    "spindle-tarantool": ("spindle", "tarantool"),
    "all-tarantool": ("tarantool", "tarantool"),
}


@pytest.mark.parametrize("kinds", KINDS)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_replica_set_with_tarantool(workload, kinds, tmp_path):
    scenario = WORKLOADS[workload]
    check_result(run(dataclasses.replace(scenario, kinds=KINDS[kinds]), tmp_path))


@pytest.mark.parametrize("kinds", MASTER_MASTER)
def test_master_master_with_tarantool(kinds, tmp_path):
    # stall m1's link, SIGSTOP m1, cut all, stall m2's link, kill -9 m2
    scenario = Scenario(workload="master-master", faults=("cut", "stall", "pause", "kill"),
                        seconds=5, seed=17, kinds=MASTER_MASTER[kinds])
    check_result(run(scenario, tmp_path))
