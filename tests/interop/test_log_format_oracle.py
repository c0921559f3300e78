"""The log module's log_format() and log.cfg as 2.6.0's: JSON lines (their members,
escaping and order; time, pid and fiber ids aside), a table message's own members,
log.cfg's fields and refusals, and box.cfg{log_format = 'json'}."""
from __future__ import annotations

import json
import re

from .oracle import both

SCRIPT = r"""
local log = require('log')
local function show(...) print(...) io.stdout:flush() end
show(pcall(log.log_format, 'bad'))
show(pcall(log.log_format))
log.log_format('json')
log.info('hello %s', 'world')
log.warn({a = 1})
log.error('bad "quote" and a/slash')
log.verbose('not shown')
log.log_format('plain')
log.info('plain again')
local function cfg_text()
    local t = {} for k, v in pairs(log.cfg) do t[#t + 1] = k .. '=' .. tostring(v) end
    table.sort(t) return table.concat(t, ' ')
end
show(cfg_text())
show(pcall(log.cfg, {format = 'json'}))
log.info('after cfg')
require('fiber').create(function() log.info('in fiber') end)
show(pcall(log.cfg, {foo = 1}))
show(pcall(log.cfg, {level = 'bad'}))
show(pcall(log.cfg, {level = 6}))
show(log.cfg.level)
show(pcall(log.cfg, {format = 'xml'}))
show(pcall(log.cfg, 5))
show(pcall(log.cfg, {nonblock = true}))
show(pcall(log.cfg, {log = 'x.log'}))
log.cfg({format = 'plain', level = 5})
box.cfg{log_format = 'json'}
log.info('after box.cfg')
show(cfg_text())
os.exit(0)
"""

_VARYING = ("time", "pid", "fiber_id")


def _json_lines(stderr: str) -> list[dict]:
    lines = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            # 2.6.0 writes '"pid": 123 ,' (a space before the comma): valid JSON
            record = json.loads(line)
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}", record["time"])
            lines.append({k: v for k, v in record.items() if k not in _VARYING})
    return lines


def test_log_format_and_cfg_as_tarantool(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    ours_json, real_json = _json_lines(ours.stderr), _json_lines(real.stderr)
    # up to box.cfg's own lines, which differ in number: the script's lines agree
    script_lines = [r for r in real_json if r.get("file") == "probe.lua"]
    assert [r for r in ours_json if r.get("file") == "probe.lua"] == script_lines
    assert [list(r) for r in script_lines][0] == ["level", "message", "cord_name", "fiber_name",
                                                  "file", "line"]
    assert '"level": "WARN", "a":1, "pid": ' in ours.stderr
    assert r'"message": "bad \"quote\" and a\/slash"' in ours.stderr
