"""Failover under load in a mixed replica set (issue 25): two Spindle nodes and one
Tarantool 2.6.3 (the last 2.6 release; election came in 2.6.1), and one Spindle
and two 2.6.3; all candidates, writers on a sync space through whichever node
leads, the leader killed with -9 three times (seeded) and started again as a
follower, whichever kind it is. Afterwards one leader agreed by all, every
acknowledged write on every node, equal data and vclocks (but for a deposed
leader's unrelayed tail, see tests/fault/invariants.py), no upstream stopped
(tests/fault/failover.py). The Spindle-only set is
tests/integration/test_election_failover.py."""
from __future__ import annotations

import pytest

from ..fault.failover import assert_failover, run_failover

# the connector warns of every connection a kill breaks: expected here
pytestmark = pytest.mark.filterwarnings("ignore::tarantool.error.NetworkWarning")


TWO_SPINDLES = ["spindle", "spindle", "tarantool-2.6.3"]
ONE_SPINDLE = ["spindle", "tarantool-2.6.3", "tarantool-2.6.3"]


@pytest.mark.parametrize("kinds, seed", [(TWO_SPINDLES, 1), (TWO_SPINDLES, 2), (ONE_SPINDLE, 1)],
                         ids=["2-spindle-1-tarantool-seed-1", "2-spindle-1-tarantool-seed-2",
                              "1-spindle-2-tarantool-seed-1"])
def test_mixed_failover_under_load(tmp_path, kinds, seed):
    assert_failover(run_failover(tmp_path, kinds, kills=3, seed=seed))
