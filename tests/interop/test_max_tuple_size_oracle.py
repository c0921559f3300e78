"""memtx_max_tuple_size against 2.6.0: a tuple whose MsgPack size plus the 14-byte
memtx tuple header passes it is refused with ER_MEMTX_MAX_TUPLE_SIZE naming that
total, nothing stored; raising the option lets it in."""
from __future__ import annotations

from .oracle import both

SCRIPT = """
box.cfg{log_level = 1}
local s = box.schema.space.create('s') s:create_index('pk')
local function try(t)
    local ok, err = pcall(s.insert, s, t)
    print(ok, ok and #err[2] or err.message)
end
print(box.cfg.memtx_max_tuple_size)
try({1, string.rep('x', 1024 * 1024)})
try({2, string.rep('x', 1024 * 1024 - 20)})
try({3, string.rep('x', 1024 * 1024 - 40)})
box.cfg{memtx_max_tuple_size = 3 * 1024 * 1024}
try({4, string.rep('x', 2 * 1024 * 1024)})
print(s:count(), s:bsize())
local e = select(2, pcall(s.replace, s, {3, string.rep('x', 4 * 1024 * 1024)}))
print(e.code, e.type, #s:get{3}[2])
os.exit(0)
"""


def test_max_tuple_size_as_2_6_0(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert (ours.returncode, ours.stdout) == (0, real.stdout), ours.stderr
