"""replication_synchro_quorum as a number and as a formula of N (core/box/limbo_quorum.py
and the box.cfg checks in core/box/cfg.py)."""
from __future__ import annotations

import pytest

from spindle.core.box.cfg import Config
from spindle.core.box.limbo_quorum import check_formula, evaluate_formula, synchro_quorum
from spindle.core.iproto.errors import ClientError, ErrorCode


@pytest.mark.parametrize("expr, n, expected", [
    ("N/2+1", 1, 1), ("N/2+1", 2, 2), ("N/2+1", 3, 2), ("N/2+1", 4, 3), ("N/2+1", 5, 3),
    ("N", 7, 7), ("2", 9, 2), ("(N+1)/2", 4, 2), ("math.floor(N/3)+1", 6, 3),
    ("math.max(2, N-1)", 1, 2), ("N - N % 2", 5, 4), ("2^2", 1, 4), ("-N+5", 3, 2),
])
def test_formula_values(expr, n, expected):
    assert evaluate_formula(expr, n) == expected


@pytest.mark.parametrize("value, replicas, expected", [
    (1, 5, 1), (2, 1, 2), (2.9, 1, 2), ("N/2+1", 0, 1), ("N/2+1", 3, 2), (b"N/2+1", 5, 3),
    ("N", 40, 31), (100, 1, 31), ("garbage(", 3, 1),
])
def test_quorum_in_force(value, replicas, expected):
    assert synchro_quorum(value, replicas) == expected


@pytest.mark.parametrize("expr, reason", [
    ("N+1", "the formula is evaluated to the quorum 32 for replica number 31, which is out "
            "of range [1;31]"),
    ("N-1", "the formula is evaluated to the quorum 0 for replica number 1, which is out "
            "of range [1;31]"),
    ("aaa", "Expression should return a number"),
    ("os.exit()", "Expression should return a number"),
    ("N/", "Invalid expression 'N/'"),
])
def test_formula_refused(expr, reason):
    with pytest.raises(ClientError) as err:
        check_formula(expr)
    assert err.value.code == ErrorCode.ER_CFG
    assert err.value.message == f"Incorrect value for option 'replication_synchro_quorum': {reason}"


def test_box_cfg_takes_a_formula_first_and_later():
    config = Config()
    config.configure({"replication_synchro_quorum": "N/2+1"})
    assert config.as_dict()["replication_synchro_quorum"] == "N/2+1"
    config.configure({"replication_synchro_quorum": 2})
    with pytest.raises(ClientError) as err:
        config.configure({"replication_synchro_quorum": "N+1"})
    assert err.value.code == ErrorCode.ER_CFG
    for not_a_formula in ("abc", "N/", True):
        with pytest.raises(ClientError) as err:
            config.configure({"replication_synchro_quorum": not_a_formula})
        assert err.value.message.endswith("should be of type number")   # as 2.6.0
    with pytest.raises(ClientError) as err:
        config.configure({"replication_synchro_quorum": True})
    assert err.value.message.endswith("should be of type number")   # as 2.6.0
