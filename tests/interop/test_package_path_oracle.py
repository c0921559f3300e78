"""package.path/cpath as 2.6.0 sets them (LUA_PATH/LUA_CPATH, ';;' the default) and
require() from the working directory and its .rocks trees, on 2.6.0 and Spindle."""
from __future__ import annotations

from .oracle import both

SCRIPT = r"""
local fio_dir = io.popen('pwd'):read('*l')
local function write(path, text)
    local f = assert(io.open(path, 'w')) f:write(text) f:close()
end
os.execute('mkdir -p sub/.rocks/share/tarantool .rocks/share/tarantool')
write('mymod.lua', 'return {v = 42}')
write('.rocks/share/tarantool/rk.lua', "return 'rock'")
write('pkg_init_dir_probe.lua', '')
print(require('mymod').v, require('rk'), #package.loaders)
local ok, err = pcall(require, 'no_such_module_q')
print(ok)
-- the searched files, without the directories that differ between the two runs
for line in err:gmatch("no file '([^']*)'") do
    if not line:find(fio_dir, 1, true) and line:sub(1, 7) ~= '/.rocks' then print(line) end
end
print(package.cpath)
local path = package.path
local prefix = fio_dir .. '/?.lua;' .. fio_dir .. '/?/init.lua;'
if path:sub(1, #prefix) == prefix then path = path:sub(#prefix + 1) end
print(path)
os.exit(0)
"""


def _compare(tmp_path):
    real, ours = both(SCRIPT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    # (Spindle also lists the script's directory, first in package.path)
    ours_lines = [line for line in ours.stdout.splitlines()
                  if line.rpartition("/")[0] != str(tmp_path / "spindle")]
    real_lines = [line for line in real.stdout.splitlines()
                  if line.rpartition("/")[0] != str(tmp_path / "tarantool")]
    assert ours_lines == real_lines
    return ours_lines


def test_default_paths_and_loaders_as_tarantool(tmp_path, monkeypatch):
    monkeypatch.delenv("LUA_PATH", raising=False)
    monkeypatch.delenv("LUA_CPATH", raising=False)
    lines = _compare(tmp_path)
    assert lines[0] == "42\trock\t8"


def test_lua_path_env_as_tarantool(tmp_path, monkeypatch):
    monkeypatch.setenv("LUA_PATH", "/opt/x/?.lua;;")
    monkeypatch.setenv("LUA_CPATH", "/opt/y/?.so")
    lines = _compare(tmp_path)
    assert "/opt/y/?.so" in lines
    assert any(line.startswith("/opt/x/?.lua;") and line.endswith(";;") for line in lines)
