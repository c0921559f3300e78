"""fio, socket, popen and pwd values and errors on the console: the same YAML as
Tarantool 2.6.0 prints, statement by statement (handles, stat results, nil-and-error
returns, raised errors)."""
from __future__ import annotations

from .oracle import console_both

STATEMENTS = """\
fio = require('fio')
socket = require('socket')
popen = require('popen')
pwd = require('pwd')
fio.pathjoin('a', 'b')
fio.stat('/nonexistent')
fio.mkdir('x')
fio.mkdir('x')
st = fio.stat('x')
st.mode, st:is_dir()
fh = fio.open('x/f', {'O_CREAT', 'O_RDWR'}, tonumber('644', 8))
fh:write('abc')
fh:seek(0)
fh:read()
fh:close()
fh
fh:read()
fio.listdir('x')
fio.open('nofile')
s = socket('AF_INET', 'SOCK_DGRAM', 'udp')
s:bind('127.0.0.1', 0)
s:name().host, s:name().family
s:recv()
s:errno(), s:error()
s:close()
s:close()
socket('AF_FOO', 'SOCK_STREAM', 0)
ph = popen.shell('echo hi', 'r')
ph:read()
ph:wait().state, ph:wait().exit_code
ph:close()
ph:read()
popen.new('x')
pwd.getpw(0).name
pwd.getgr('root').id
pwd.getpw({})
"""


def test_console_shows_what_tarantool_shows(tmp_path):
    theirs, ours = console_both(STATEMENTS, tmp_path)
    assert len(theirs) > 30
    assert ours == theirs
