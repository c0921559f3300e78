"""require() against 2.6.0: a module's body may yield (a fiber.sleep, a DDL that
waits for the WAL), loops and failed loads are reported as LuaJIT reports them, a
module that returns nothing is `true`, package.preload and package.loaded are
honoured, bad arguments get LuaJIT's words."""
from __future__ import annotations

import re

from .oracle import SPINDLE, run_script, tarantool_binary

MODULES = {
    "sleepy.lua": "require('fiber').sleep(0.01)\nreturn {answer = 42}\n",
    "ddl.lua": ("box.schema.space.create('from_module')\n"
                "box.space.from_module:create_index('pk')\n"
                "box.space.from_module:insert{1}\nreturn {n = box.space.from_module:count()}\n"),
    "loop_a.lua": "return {b = require('loop_b')}\n",
    "loop_b.lua": "return {a = require('loop_a')}\n",
    "broken.lua": "error('broken on purpose')\n",
    "silent.lua": "x_from_silent = (x_from_silent or 0) + 1\n",
    "self_set.lua": "package.loaded['self_set'] = 'set by itself'\n",
    "args.lua": "return {select('#', ...), ...}\n",
    "7.lua": "return 'seven'\n",
}

SCRIPT = r"""
box.cfg{log_level = 1}
local function show(label, ok, v)
    if type(v) == 'table' then v = require('json').encode(v) end
    print(label, tostring(ok), tostring(v))
end
show('sleepy', pcall(require, 'sleepy'))
show('sleepy again', pcall(function() return require('sleepy').answer end))
show('ddl', pcall(require, 'ddl'))
show('loop', pcall(require, 'loop_a'))
show('broken', pcall(require, 'broken'))
show('broken again', pcall(require, 'broken'))
show('silent', pcall(require, 'silent'))
show('silent again', pcall(require, 'silent'))
print('silent ran', x_from_silent)
show('self_set', pcall(require, 'self_set'))
show('args', pcall(require, 'args'))
show('number', pcall(require, 7))
package.preload['pre'] = function(...) return {'preloaded', ...} end
show('preload', pcall(require, 'pre'))
package.loaded['fake'] = 'from loaded'
show('loaded', pcall(require, 'fake'))
show('no arg', pcall(require))
show('table arg', pcall(require, {}))
show('direct call', pcall(function() return require(true) end))
local f = require('fiber')
local ch = f.channel(1)
f.create(function() ch:put(require('sleepy').answer) end)
print('in a fiber', ch:get(5))
os.exit(0)
"""


def test_require_as_2_6_0(tmp_path):
    results = []
    for side, binary in (("tarantool", tarantool_binary()), ("spindle", SPINDLE)):
        (tmp_path / side).mkdir()
        for name, text in MODULES.items():
            (tmp_path / side / name).write_text(text)
        results.append(run_script(binary, SCRIPT, tmp_path / side))
    # (error positions name the module file by its path, which differs: its name stays)
    real, ours = (re.sub(r"[^\t ]*/(\w+\.lua):", r"\1:", r.stdout) for r in results)
    real_run, our_run = results
    assert real_run.returncode == 0, real_run.stderr
    assert "sleepy\ttrue\t" in real and "loop or previous error" in real
    assert ours == real, our_run.stderr
