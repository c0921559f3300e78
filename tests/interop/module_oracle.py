"""What the oracle tests of Tarantool's small Lua modules (errno, digest, crypto, the
string/table/os/debug extensions) share: a `show` that prints one line per case
(pcall's status and each result, strings in hex when they are not printable, so
binary digests compare byte for byte) and the comparison of both outputs."""
from __future__ import annotations

import difflib

from .oracle import both

PRELUDE = r"""
local function hex(s)
    return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))
end
local function describe(v)
    if (type(v) == 'cdata' or type(v) == 'table') and
            pcall(function() return v.base_type end) and v.base_type ~= nil then
        return 'error:' .. v.type .. ':' .. tostring(v.code) .. ':' .. v.message
    end
    if type(v) == 'string' then
        if v:find('[^%g ]') then return 'hex:' .. hex(v) end
        return 'str:' .. v
    end
    if type(v) == 'table' then
        local keys = {}
        for k in pairs(v) do keys[#keys + 1] = tostring(k) end
        table.sort(keys)
        local out = {}
        for _, k in ipairs(keys) do
            local value = v[k] ~= nil and v[k] or v[tonumber(k)]
            out[#out + 1] = k .. '=' .. describe(value)
        end
        return '{' .. table.concat(out, ',') .. '}'
    end
    if type(v) == 'function' or type(v) == 'userdata' or type(v) == 'thread' then
        return type(v)
    end
    return type(v) .. ':' .. tostring(v)
end
"""
# One line per case: the label, pcall's status, each result through `describe`, which
# the prelude before it defines (PRELUDE's, or a module test's own).
SHOW = r"""
function show(label, f, ...)
    local r = {pcall(f, ...)}
    local out = {label, tostring(r[1])}
    for i = 2, table.maxn(r) do out[#out + 1] = describe(r[i]) end
    print(table.concat(out, ' | '))
end
"""
PRELUDE += SHOW


def assert_same_output(script: str, tmp_path, min_lines: int = 5,
                       prelude: str = PRELUDE) -> list[str]:
    """Run prelude + script on 2.6.0 and Spindle; their outputs must be equal."""
    real, ours = both(prelude + script + "\nos.exit(0)\n", tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert real.stdout.count("\n") >= min_lines, real.stdout
    diff = list(difflib.unified_diff(real.stdout.splitlines(), ours.stdout.splitlines(),
                                     "tarantool", "spindle", lineterm="", n=1))
    assert not diff, "\n".join(diff)
    return ours.stdout.splitlines()
