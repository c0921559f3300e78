"""box.cfg's values as Lua code reads them, against 2.6.0: every key pairs() gives
after the first box.cfg and after a reconfiguration, with its Lua type and value.
An unset option is nil (absent), never the truthy box.NULL; numbers are Lua numbers
(checkpoint_wal_threshold is 1e+18, not a uint64 cdata)."""
from __future__ import annotations

import pytest

from .oracle import both

DUMP = """
local function dump(label)
    local keys = {}
    -- (election_mode/_timeout: 2.6.1+ options 2.6.0 lacks; see test_election_oracle.py)
    for k in pairs(box.cfg) do
        if not k:match('^election_') then table.insert(keys, k) end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
        local v = box.cfg[k]
        local shown = type(v) == 'table' and require('json').encode(v) or tostring(v)
        print(label, k, type(v), shown)
    end
    print(label, 'truthy', box.cfg.pid_file and 'yes' or 'no', box.cfg.listen and 'yes' or 'no')
end
"""


@pytest.mark.parametrize("first, later", [
    ("{log_level = 1}", "{checkpoint_count = 3}"),
    ("{log_level = 1, listen = '127.0.0.1:0', read_only = false, memtx_memory = 2^28}",
     "{replication = {}, checkpoint_wal_threshold = 2^40, listen = box.NULL}"),
])
def test_box_cfg_values_as_lua_sees_them(first, later, tmp_path):
    script = DUMP + f"box.cfg{first}\ndump('first')\nbox.cfg{later}\ndump('later')\nos.exit(0)\n"
    real, ours = both(script, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    assert "cdata" not in ours.stdout
