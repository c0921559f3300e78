"""What `box` holds before the first box.cfg, against 2.6.0: box.ctl, box.session,
box.index, box.error, box.tuple, box.NULL and box.cfg are there; the parts that need
the database refuse with "Please call box.cfg{} first"."""
from __future__ import annotations

from .oracle import both

# 2.6.0 has these too, Spindle not yet: SQL (box.execute) and box.internal.
NOT_IN_SPINDLE = {"execute", "internal"}

SCRIPT = """
local keys = {}
for k, v in pairs(box) do table.insert(keys, k .. ':' .. type(v)) end
table.sort(keys)
print(table.concat(keys, ' '))
for _, name in ipairs({'info', 'space', 'schema', 'once', 'stat', 'slab', 'backup',
                       'func', 'sequence', 'feedback', 'snapshot', 'begin'}) do
    local ok, err = pcall(function() return box[name] end)
    print(name, ok, (tostring(err):match('Please call box.cfg{} first')))
end
print(box.session.id(), box.session.user(), box.session.uid(), box.session.type())
print(type(box.ctl.wait_rw), type(box.ctl.wait_ro), type(box.ctl.clear_synchro_queue))
print(box.index.EQ, box.index.GE, box.index.ALL)
os.exit(0)
"""


def test_box_before_box_cfg(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    real_lines, our_lines = real.stdout.splitlines(), ours.stdout.splitlines()
    real_keys = {k for k in real_lines[0].split() if k.split(":")[0] not in NOT_IN_SPINDLE}
    assert set(our_lines[0].split()) == real_keys
    assert our_lines[1:] == real_lines[1:]
