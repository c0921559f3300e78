"""A Tarantool 2.6.0 data dir with every index kind (issue 23 item 4) opened by
Spindle: the snapshot and the WAL after it bring the JSON-path, nullable, collated,
BITSET, RTREE, multikey and functional (plain and multikey) index definitions and
their data; Spindle's reads through each index are 2.6.0's on the same files."""
from __future__ import annotations

import shutil

from .oracle import SPINDLE, run_script, tarantool_binary
from .test_index_kinds_replication import MULTIKEY_FUNC, READS, SCHEMA, rows

CREATE = "box.cfg{log_level = 1}\n" + SCHEMA + rows(1, 20) + """
box.snapshot()
""" + rows(21, 10) + """
box.space.j:create_index('path2', {parts = {{2, 'string', path = 'a.b'}, {1, 'unsigned'}},
                                   unique = false})
box.space.j:delete{3}
box.space.m:delete{2}
""" + MULTIKEY_FUNC + """
box.space.m:update({4}, {{'=', 2, {9, 4}}})
os.exit(0)
"""

READ = """
box.cfg{log_level = 1}
local yaml = require('yaml')
local reads = (function() """ + READS + """ end)()
print(yaml.encode(reads))
print(yaml.encode(box.space.j.index.path2:select({'k2'}, {iterator = 'GE', limit = 3})))
print(yaml.encode(box.space.m.index.mk:select({20}, {iterator = 'LE', limit = 4})))
print(yaml.encode(box.space.m.index.func:select({7}, {iterator = 'GE', limit = 4})))
print(yaml.encode(box.space.m.index.fmk:select({9}, {iterator = 'LE', limit = 5})))
print(box.space.m.index.fmk:count(), box.space.m.index.fmk.func.name)
os.exit(0)
"""


def test_spindle_opens_a_2_6_0_data_dir_with_every_index_kind(tmp_path):
    made = tmp_path / "made"
    made.mkdir()
    created = run_script(tarantool_binary(), CREATE, made)
    assert created.returncode == 0, created.stderr
    shutil.copytree(made, tmp_path / "spindle")
    real = run_script(tarantool_binary(), READ, made, name="read.lua")
    ours = run_script(SPINDLE, READ, tmp_path / "spindle", name="read.lua")
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
