"""Tarantool's small Lua modules (pickle, strict): the same script on 2.6.0 and Spindle
prints the same lines, bad arguments included."""
from __future__ import annotations

from .module_oracle import assert_same_output

PICKLE = r"""
local pickle = require('pickle')
for _, f in ipairs{'b', 'B', 's', 'S', 'i', 'I', 'l', 'L', 'n', 'N', 'q', 'Q', 'f', 'd', 'a', 'A', 'z'} do
    show('pack ' .. f, pickle.pack, f, 65)
    local ok, p = pcall(pickle.pack, f, 65)
    if ok then show('unpack ' .. f, pickle.unpack, f, p) end
end
show('mixed', function() return pickle.unpack('bsilnNq', pickle.pack('bsilnNq', 1, 2, 3, 4, 5, 6, 7)) end)
show('wide', function() return pickle.unpack('l', pickle.pack('l', -1)) end)
show('byte', function() return pickle.unpack('b', pickle.pack('b', -1)) end)
show('trunc', pickle.pack, 'i', 2^40)
show('cdata', pickle.pack, 'Q', 1ULL)
show('floats', function() return pickle.unpack('fd', pickle.pack('fd', 1.5, 2.5)) end)
show('rest', pickle.unpack, 'ia', pickle.pack('ia', 7, 'xyz'))
show('short', pickle.unpack, 'ss', pickle.pack('s', 258))
show('long', pickle.unpack, 'i', 'abcdef')
show('not int', pickle.pack, 'i', 'abc')
show('numeric string', pickle.pack, 'i', '12')
show('not byte', pickle.pack, 'b', 'x')
show('not 64', pickle.pack, 'l', {})
show('few', pickle.pack, 'ii', 1)
show('many', pickle.pack, 'i', 1, 2)
show('no format', pickle.pack)
show('no data', pickle.unpack, 'i')
show('table string', pickle.pack, 'a', {})
show('number string', pickle.pack, 'a', 5)
show('bad unpack', pickle.unpack, 5, 'abcd')
show('empty rest', pickle.unpack, 'a', '')
"""

STRICT = r"""
local strict = require('strict')
show('keys', function() return strict end)
strict.on()
declared_in_main = 1
show('read', function() return undeclared_x end)
show('write', function() undeclared_y = 1 end)
show('nested', function() local f = function() undeclared_z = 1 end f() end)
show('declared', function() return declared_in_main end)
strict.on()
strict.off()
show('off read', function() return undeclared_x end)
show('off write', function() undeclared_w = 2 return undeclared_w end)
"""


def test_pickle_as_tarantool(tmp_path):
    assert_same_output(PICKLE, tmp_path, min_lines=40)


def test_strict_as_tarantool(tmp_path):
    assert_same_output(STRICT, tmp_path, min_lines=6)

TITLE = r"""
local title = require('title')
show('keys', function() return title end)
title.update{script_name = 'scr', custom_title = 'ct', interpretor_name = 'int'}
show('parts', title.get)
title.update{status = 'running'}
show('status', title.get)
title.update{custom_title = ''}
show('cleared', title.get)
title.update('abc')
show('string', title.get)
show('number', title.update, 5)
"""

TARANTOOL = r"""
local tt = require('tarantool')
local keys = {}
for k, v in pairs(tt) do keys[#keys + 1] = k .. ':' .. type(v) end
table.sort(keys)
show('keys', table.concat, keys, ' ')
local build = {}
for k, v in pairs(tt.build) do build[#build + 1] = k .. ':' .. type(v) end
table.sort(build)
show('build', table.concat, build, ' ')
show('version', function() return tt.version == _TARANTOOL, tt.version:match('^2%.6%.0%-') ~= nil end)
show('uptime', function() return type(tt.uptime()), tt.uptime() >= 0, tt.pid() > 0 end)
show('help', function() return type(help), type(tutorial), type(help()), type(help()[1]) end)
show('help text', function() return help()[1]:match('^[^\n]*') end)
show('help module', function()
    return type(require('help').help), type(require('help.en_US').help),
           type(require('help.en_US').tutorial)
end)
show('tutorial', function()
    return tutorial():match('^Tutorial %-%- Screen #1'), tutorial('next'):match('Screen #2'),
           tutorial('prev'):match('Screen #1'), tutorial(-5):match('Screen #1')
end)
"""


def test_title_as_tarantool(tmp_path):
    assert_same_output(TITLE, tmp_path, min_lines=6)


def test_tarantool_and_help_as_tarantool(tmp_path):
    """Same keys and kinds; the version names Spindle's build of 2.6.0."""
    lines = assert_same_output(TARANTOOL, tmp_path, min_lines=7)
    assert "keys | true | str:build:table package:string pid:function uptime:function " \
           "version:string" in lines
