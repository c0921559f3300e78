"""Persistent functions across replication (issue 23 item 3): a Spindle replica of a
Tarantool 2.6.0 master and the reverse. The JOIN brings the `_func` rows made before
it, the stream those made after (and a drop); on the replica box.func shows them and
an IPROTO CALL runs each — a body, a named global, setuid — with the result the
master gives, and a dropped one is gone."""
from __future__ import annotations

import pytest

from ..integration.cluster import Cluster, same_vclocks, wait_for

FAST = {"replication_timeout": 0.1}

# globals both sides define (a function named after a global runs that global)
GLOBALS = "function twice(x) return x * 2 end function whoami() return box.session.effective_user() end"

BEFORE_JOIN = """
box.schema.func.create('sum', {body = 'function(a, b) return a + b end'})
box.schema.func.create('twice')
box.schema.func.create('whoami', {setuid = true})
box.schema.func.create('gone', {body = 'function() return 1 end'})
"""

AFTER_JOIN = """
box.schema.func.create('concat', {body = 'function(a, b) return a .. b end',
                                  is_deterministic = true})
box.schema.func.drop('gone')
"""

SHOW = """
local out = {}
for _, name in ipairs({'sum', 'twice', 'whoami', 'concat', 'gone'}) do
    local f = box.func[name]
    out[name] = f and (f.language .. ' ' .. tostring(f.setuid) .. ' '
                       .. tostring(f.body) .. ' ' .. tostring(f.is_deterministic)) or 'none'
end
return out
"""


@pytest.mark.parametrize("master_kind, replica_kind", [("tarantool", "spindle"),
                                                       ("spindle", "tarantool")])
def test_persistent_functions_replicate(master_kind, replica_kind, tmp_path):
    with Cluster(tmp_path) as cluster:
        master = cluster.add(master_kind, "master", FAST, extra_lua=GLOBALS).start()
        master.eval(BEFORE_JOIN)
        replica = cluster.add(replica_kind, "replica",
                              {**FAST, "replication": [master.rep_uri], "read_only": True},
                              extra_lua=GLOBALS).start()
        wait_for(lambda: replica.upstream_status(1) == "follow", 60, "the replica to follow")
        master.eval(AFTER_JOIN)
        wait_for(lambda: same_vclocks(master, replica), 60, "the stream")
        assert replica.eval(SHOW) == master.eval(SHOW)
        assert replica.eval(SHOW)["gone"] == "none"
        results = []
        for node in (master, replica):
            conn = node._connection()
            results.append([conn.call(name, args).data for name, args in
                            (("sum", [2, 3]), ("twice", [21]), ("concat", ["a", "b"]),
                             ("whoami", []))])
        # whoami runs as its owner: the user the test's eval ran as (guest with super)
        assert results[1] == results[0] == [[5], [42], ["ab"], ["guest"]]


def test_a_2_6_0_data_dir_with_functions_opens_on_spindle(tmp_path):
    """2.6.0 makes the functions (snapshot and xlog), Spindle recovers them."""
    from .oracle import SPINDLE, run_script, tarantool_binary
    made = run_script(tarantool_binary(), "box.cfg{log_level = 1}\n" + BEFORE_JOIN
                      + "box.snapshot()\n" + AFTER_JOIN + "os.exit(0)\n", tmp_path)
    assert made.returncode == 0, made.stderr
    shown = run_script(SPINDLE, "box.cfg{log_level = 1}\n" + GLOBALS + "\n"
                       "local out = (function() " + SHOW + " end)()\n"
                       "for _, k in ipairs({'sum', 'twice', 'whoami', 'concat', 'gone'}) do "
                       "print(k, out[k]) end\n"
                       "print(box.func.sum:call({2, 3}), box.func.concat:call({'a', 'b'}), "
                       "box.func.twice:call({21}))\n"
                       "os.exit(0)\n", tmp_path, name="open.lua")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "sum\tLUA false function(a, b) return a + b end false",
        "twice\tLUA false nil false",
        "whoami\tLUA true nil false",
        "concat\tLUA false function(a, b) return a .. b end true",
        "gone\tnone",
        "5\tab\t42",
    ]
