"""box.error, box.NULL and box.cfg's behaviour before and after configuration:
the same script prints the same lines in Tarantool 2.6.0 and in Spindle."""
from __future__ import annotations

from .oracle import both

SCRIPT = r"""
local e = box.error.new(1, 'x')
local u = e:unpack()
print(u.type, u.code, u.message, u.trace[1].file, u.trace[1].line)
print(e.type, e.code, e.message, e.base_type)
print(tostring(box.error.new{code=5, reason='r'}), box.error.new{code=5, reason='r'}.code)
print(pcall(box.error, 1, 'zz'))
print(box.error.last())
box.error.clear()
print(box.error.last())
print(pcall(box.error, {code = 77, reason = 'custom'}))
print(pcall(box.error, box.error.new(3, 'a', 'b')))
print(pcall(box.error))
print(box.error.ILLEGAL_PARAMS, box.error.CFG, box.error.REPLICA_ID_IS_RESERVED)
print(pcall(box.error.new, 'x'))
print(pcall(box.error.new))
print(type(box.cfg))
print(box.NULL, type(box.NULL), box.NULL == nil)
print(pcall(box.cfg, 'x'))
print(pcall(box.cfg, {listen = {}}))
print(pcall(box.cfg, {no_such_option = 1}))
print(pcall(box.cfg, {wal_mode = 'bogus'}))
box.cfg{log_level = 4}
print(type(box.cfg), box.cfg.log_level, getmetatable(box.cfg).__call ~= nil)
print(pcall(box.cfg, {memtx_dir = 'elsewhere'}))
print(pcall(box.cfg, {log_level = 'x'}))
box.cfg{log_level = 5}
print(box.cfg.log_level, box.cfg.readahead, box.cfg.wal_mode, box.cfg.replication_timeout)
os.exit(0)
"""


def test_same_output_as_tarantool(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == real.stdout.splitlines()
