"""Failover under load between Spindle nodes (issue 25): three candidates, writers
on a sync space through whichever node leads, the leader killed with -9 three
times (seeded) and started again as a follower; afterwards one leader agreed by
all, every acknowledged write on every node, equal data and vclocks, no upstream
stopped (tests/fault/failover.py). The mixed set with Tarantool 2.6.3 is
tests/interop/test_election_failover_oracle.py."""
from __future__ import annotations

import pytest

from ..fault.failover import assert_failover, run_failover

# the connector warns of every connection a kill breaks: expected here
pytestmark = pytest.mark.filterwarnings("ignore::tarantool.error.NetworkWarning")


@pytest.mark.parametrize("seed", [1, 2])
def test_spindle_failover_under_load(tmp_path, seed):
    assert_failover(run_failover(tmp_path, ["spindle"] * 3, kills=3, seed=seed))
