"""The errno module against Tarantool 2.6.0: its constants, errno() as getter and
setter (how arguments convert, what is refused and with which words), strerror."""
from __future__ import annotations

from .module_oracle import assert_same_output


def test_constants_are_the_same_set_and_numbers(tmp_path):
    assert_same_output(r"""
local errno = require('errno')
local names = {}
for k, v in pairs(getmetatable(errno).__index) do names[#names + 1] = k .. '=' .. v end
table.sort(names)
print(#names, table.concat(names, ' '))
print(errno.EINVAL, errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOTSUP, errno.NOSUCH)
print(rawget(errno, 'EINVAL'), type(errno.strerror), rawget(_G, 'errno'))
show('new constant', function() errno.EFOO = 1 end)
show('overwrite', function() errno.EINVAL = 1 end)
print(errno.EINVAL)
""", tmp_path, min_lines=4)


def test_getter_setter_and_conversions(tmp_path):
    assert_same_output(r"""
local errno = require('errno')
show('read', errno)
show('set 5', errno, 5)
show('read', errno)
for _, v in ipairs({1.5, -1, 2^40, 4294967297, -2147483648.7, 2147483647.9, -1/0, 0/0,
                    true, false, 1LL, 5000000000LL, -3ULL}) do
    show('set ' .. tostring(v), errno, v)
    show('now', errno)
end
show('two args', errno, 3, 4)
show('now', errno)
for _, v in ipairs({'7', 'x', {}}) do
    show('refused ' .. type(v), errno, v)
    show('now', errno)
end
show('nil', errno, nil)
show('now', errno)
print(pcall(function() return errno('x') end))
print(pcall(function() local e = errno('x') return e end))
""", tmp_path)


def test_strerror(tmp_path):
    assert_same_output(r"""
local errno = require('errno')
for _, v in ipairs({0, 1, 2, 22, 110, -1, 100000, 2.7, '3', 2^40, 0/0, true, {}, 'x'}) do
    show('strerror ' .. type(v) .. ' ' .. (type(v) == 'table' and '' or tostring(v)), errno.strerror, v)
end
errno(0)
show('current 0', errno.strerror)
errno(errno.ENOENT)
show('current ENOENT', errno.strerror)
show('explicit nil', errno.strerror, nil)
""", tmp_path)
