"""box.ctl.on_schema_init against 2.6.0 (issue 23 item 6): triggers set before the
first box.cfg run once the system spaces exist and before recovery, so a
before_replace trigger they put on _space sees every space recovery brings back,
from the snapshot and from the xlogs. The same script twice on both binaries."""
from __future__ import annotations

from .oracle import SPINDLE, run_script, tarantool_binary

SCRIPT = """
local seen = {}
print(#box.ctl.on_schema_init())
box.ctl.on_schema_init(function()
    table.insert(seen, 'init ' .. tostring(box.space._space ~= nil) .. ' '
                 .. tostring(box.space.test == nil))
    box.space._space:before_replace(function(old, new)
        if new and new[1] >= 512 then table.insert(seen, 'space ' .. new[3]) end
        return new
    end)
end)
box.cfg{log_level = 1}
if box.space.test == nil then
    box.schema.space.create('test')
    box.snapshot()
    box.schema.space.create('test2')
end
for _, line in ipairs(seen) do print(line) end
print(#box.ctl.on_schema_init(), box.space.test ~= nil, box.space.test2 ~= nil)
os.exit(0)
"""


def test_on_schema_init_sees_recovery(tmp_path):
    outputs = []
    for name, binary in (("tarantool", tarantool_binary()), ("spindle", SPINDLE)):
        cwd = tmp_path / name
        cwd.mkdir()
        runs = [run_script(binary, SCRIPT, cwd) for _ in range(2)]   # bootstrap, recovery
        for run in runs:
            assert run.returncode == 0, run.stderr
        outputs.append([run.stdout for run in runs])
    assert outputs[1] == outputs[0]
    assert "space test\nspace test2\n" in outputs[0][1]      # recovered, seen
