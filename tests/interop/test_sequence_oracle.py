"""Sequences (issue 23 item 2) against the real Tarantool 2.6.0 binary: the same Lua on
both, outputs compared (results, errors, box.sequence objects, auto-increment), the
rows both write into their WAL and snapshot compared byte for byte, and each one's
data dir opened by the other.

A drop refused for "the sequence is in use" is 2.6.0's too: its statements commit
one by one, so the grants and the `_sequence_data` row are gone by then (DROPS).
"""
from __future__ import annotations

import glob
import os
import re
import shutil

import pytest

from spindle.core.iproto.request import decode_dml_body
from spindle.core.xlog.files import XlogReader

from .oracle import SPINDLE, both, run_script, serve_both, tarantool_binary

PRELUDE = """
box.cfg{log_level = 1}
local function try(f, ...) print(pcall(f, ...)) end
-- (by the first field: a hash index's order is its table's)
local function rows(space)
    local all = space:select{}
    table.sort(all, function(a, b) return a[1] < b[1] end)
    for _, t in ipairs(all) do print(t) end
    print('--')
end
"""

API = PRELUDE + """
local s = box.schema.sequence.create('s')
print(type(s), s.id, s.uid, s.name, s.step, s.min, s.max, s.start, s.cache, s.cycle)
print(type(s.max), type(s.min), type(s.step))
print(s:next(), type(s:next()))
print(s:current(), type(s:current()))
print(box.sequence[s.id] == s, box.sequence.s == s)
try(s.set, s, 100)
print(s:current(), s:next())
print(s:reset(), pcall(s.current, s))
rows(box.space._sequence)
rows(box.space._sequence_data)
try(box.schema.sequence.create, 's')
print(box.schema.sequence.create('s', {if_not_exists = true}) == s)
print(select(2, box.schema.sequence.create('s', {if_not_exists = true})))
try(box.schema.sequence.create, 'z', {step = 0})
try(box.schema.sequence.create, 'z', {min = 10, max = 5})
try(box.schema.sequence.create, 'z', {start = 100, max = 5})
try(box.schema.sequence.create, 'z', {foo = 1})
try(box.schema.sequence.create, 'z', {step = 'x'})
try(box.schema.sequence.create, 'z', {max = 1.5})
try(box.schema.sequence.create, 'z', 'x')
try(box.schema.sequence.create, 1)
try(box.schema.sequence.create, string.rep('x', 65001))
try(box.schema.sequence.drop, 'nosuch')
try(box.schema.sequence.drop, 's', 'x')
try(box.schema.sequence.drop, 3.5)
try(box.schema.sequence.alter, 'nosuch', {})
local d = box.schema.sequence.create('d', {step = -2})
print(d.min, d.max, d.start, d:next(), d:next())
local c = box.schema.sequence.create('c', {min = 1, max = 3, cycle = true})
print(c:next(), c:next(), c:next(), c:next())
local o = box.schema.sequence.create('o', {min = 1, max = 2})
print(o:next(), o:next(), pcall(o.next, o))
local big = box.schema.sequence.create('big', {start = 2^53 - 1, min = 2^53 - 1})
print(big:next(), big:next(), big:next())
box.schema.sequence.alter('o', {max = 5, name = 'o2'})
print(box.sequence.o, box.sequence.o2.max, o.max, o.name, o:next())
try(box.schema.sequence.alter, 'o2', {step = 0})
try(box.schema.sequence.alter, 'o2', {bad = 0})
try(o.alter, o, {start = 0})
o:alter({min = 0, start = 0})
print(o.min, o.start)
print(box.schema.sequence.alter('o2'))
o:drop()
print(box.sequence.o2, o.name)
try(o.next, o)
try(o.current, o)
rows(box.space._sequence)
try(s.current, {})
try(s.current, {id = 'x'})
try(s.current, nil)
try(s.next, 5)
try(s.next, 'str')
try(s.next, {})
try(s.set, {id = s.id}, nil)
try(s.set, s, '77') print(s:current())
try(s.set, s, 1.9) print(s:current())
try(s.set, s, -1.9) print(s:current())
try(s.reset, nil)
try(s.alter, nil)
try(s.drop, nil)
-- next() where Lua cannot yield: a before_replace trigger
local t = box.schema.space.create('t')
t:create_index('pk')
t:before_replace(function(old, new) return new:update{{'=', 3, s:next()}} end)
print(t:insert{0, 'a'}, t:insert{1, 'b'})
box.begin() s:set(500) box.rollback()
print(s:current())
box.begin() s:next() s:reset() box.rollback()
print(s:current())
rows(box.space._sequence_data)
os.exit(0)
"""

INDEX_OPTION = PRELUDE + """
local t = box.schema.space.create('t')
local pk = t:create_index('pk', {sequence = true})
print(pk.sequence_id, pk.sequence_fieldno, pk.sequence_path, box.sequence.t_seq.id)
rows(box.space._space_sequence)
print(t:insert{nil, 'a'}, t:insert{box.NULL, 'b'}, t:replace{nil, 'c'})
print(t:insert{10, 'x'}, t:insert{nil, 'y'})
print(t:insert{5, 'z'}, t:insert{nil, 'w'})
try(t.insert, t, {})
try(t.insert, t, {'str'})
try(t.insert, t, {-5})
try(t.insert, t, {1.5})
rows(box.space._sequence_data)
print(box.sequence.t_seq:current())
try(t.insert, t, {nil, 1, 2})
try(box.schema.sequence.drop, 't_seq')
try(box.space._sequence.delete, box.space._sequence, {box.sequence.t_seq.id})
box.sequence.t_seq:set(11)
try(t.insert, t, {box.NULL, 'dup'})
print(box.sequence.t_seq:current())
try(box.space._index.delete, box.space._index, {t.id, 0})
try(box.space._space_sequence.update, box.space._space_sequence, {t.id}, {{'=', 3, false}})
try(box.space._space_sequence.insert, box.space._space_sequence, {t.id, 99, false, 0, ''})
t.index.pk:alter({sequence = false})
print(t.index.pk.sequence_id, box.sequence.t_seq)
rows(box.space._space_sequence)
try(t.insert, t, {nil, 'q'})
local my = box.schema.sequence.create('myseq', {start = 100, min = 100})
t.index.pk:alter({sequence = 'myseq'})
rows(box.space._space_sequence)
print(t:insert{nil, 'q'}, t.index.pk.sequence_id)
try(t.index.pk.alter, t.index.pk, {parts = {1, 'string'}})
t.index.pk:alter({sequence = true})
box.sequence.t_seq:set(1000)
print(t:insert{nil, 'r'}, box.sequence.myseq ~= nil, box.sequence.t_seq ~= nil)
t.index.pk:alter({sequence = {id = my.id}})
print(box.sequence.t_seq, t:insert{nil, 's'})
try(t.create_index, t, 'sk', {parts = {1, 'unsigned'}, unique = false, sequence = true})
t:create_index('sk', {parts = {1, 'unsigned'}, unique = false, sequence = false})
t:drop()
rows(box.space._space_sequence)
print(box.sequence.myseq.name, my:current())
local u = box.schema.space.create('u', {format = {{'a', 'string'}, {'b', 'unsigned'}}})
try(u.create_index, u, 'pk', {parts = {'a', 'b'}, sequence = true})
u:create_index('pk', {parts = {'a', 'b'}, sequence = {field = 'b'}})
print(u.index.pk.sequence_fieldno)
rows(box.space._space_sequence)
try(u.insert, u, {'k', nil})
print(u:insert{'k', box.NULL}, u:insert{'j', box.NULL, 'x'}, u:insert{'k', 7})
print(u:insert{'k', box.NULL})
print(box.space._index:get{u.id, 0})
u.index.pk:alter({sequence = {field = 'b'}})
print(u:insert{'m', box.NULL})
local n = 0
local function fresh() n = n + 1 return box.schema.space.create('v' .. n) end
for _, opt in ipairs({3.5, {foo = 1}, {field = 'nofield'}, {field = 1, id = 'nosuch'},
                      {id = 77}, 0, -1, '', {field = '[1]'}, {field = 2}, {id = 'u_seq'},
                      'myseq', {}, {id = 'myseq', field = 1}}) do
    local v = fresh()
    try(v.create_index, v, 'pk', {sequence = opt})
    print(v.index.pk and v.index.pk.sequence_id)
end
try(fresh().create_index, box.space['v' .. n], 'pk', {sequence_field = 1})
rows(box.space._sequence)
rows(box.space._space_sequence)
local w = box.schema.space.create('w')
w:create_index('pk', {sequence = true})
w:insert{box.NULL}
print(box.sequence.w_seq:next())
w:truncate()
print(w:insert{box.NULL}, box.sequence.w_seq:current())
try(box.space._sequence_data.delete, box.space._sequence_data, {box.sequence.w_seq.id})
try(box.space._sequence_data.replace, box.space._sequence_data, {999, 1})
try(box.space._sequence_data.replace, box.space._sequence_data, {box.sequence.w_seq.id, 50})
print(w:insert{box.NULL})
box.begin() w:insert{box.NULL} box.rollback()
print(box.sequence.w_seq:current())
w:insert{box.NULL, 'x'}
box.sequence.w_seq:reset()
print(w:insert{box.NULL})
print(w:auto_increment{'ai'})
local arg = {'mine'}
w:auto_increment(arg)
print(arg[1], arg[2])
os.exit(0)
"""

ACCESS = PRELUDE + """
local s = box.schema.sequence.create('s')
local t = box.schema.space.create('t')
t:create_index('pk', {sequence = 's'})
box.schema.user.create('u')
box.schema.user.grant('u', 'read,write', 'space', 't')
box.schema.user.grant('u', 'read', 'space', '_sequence')
box.schema.user.grant('u', 'read', 'space', '_space_sequence')
print(box.session.su('u', pcall, t.insert, t, {box.NULL, 'u'}))
print(box.session.su('u', pcall, s.next, s))
print(box.session.su('u', pcall, s.current, s))
print(box.session.su('u', pcall, t.insert, t, {7, 'explicit'}))
box.schema.user.grant('u', 'write', 'sequence', 's')
print(box.session.su('u', pcall, t.insert, t, {box.NULL, 'u'}))
print(box.session.su('u', pcall, s.next, s))
print(box.schema.user.info('u')[4][2], box.schema.user.info('u')[4][3])
print(box.session.su('u', pcall, box.schema.sequence.create, 'us'))
box.schema.user.revoke('u', 'write', 'sequence', 's')
t.index.pk:alter({sequence = true})
box.sequence.t_seq:set(100)
print(box.session.su('u', pcall, t.insert, t, {box.NULL, 'generated'}))
box.schema.user.grant('u', 'create', 'universe')
box.schema.user.grant('u', 'write', 'space', '_sequence')
print(box.session.su('u', pcall, box.schema.sequence.create, 'us'))
print(box.sequence.us.uid == box.space._user.index.name:get{'u'}.id)
box.schema.user.drop('u')
print(box.sequence.us)
box.cfg{read_only = true}
print(pcall(s.next, s), s:current())
print(pcall(s.set, s, 5), s:current())
print(pcall(s.reset, s), pcall(s.current, s))
print(pcall(t.insert, t, {box.NULL}), box.sequence.t_seq:current())
box.cfg{read_only = false}
print(s:next(), t:insert{box.NULL})
os.exit(0)
"""


@pytest.mark.parametrize("script", [API, INDEX_OPTION, ACCESS],
                         ids=["api", "index-option", "access-read-only"])
def test_sequences_as_2_6_0(script, tmp_path):
    real, ours = both(script, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert _addresses(ours.stdout) == _addresses(real.stdout)


def _addresses(output: str) -> list[str]:
    """The lines, with the tables' addresses masked."""
    return re.sub(r"table: 0x[0-9a-f]+", "table: ADDR", output).splitlines()


# ---------------------------------------------------------- WAL and snapshot

ROWS = """
box.cfg{log_level = 1}
local s = box.schema.sequence.create('s', {min = -5, start = -2, step = 3, cache = 2,
                                           cycle = true})
s:next() s:next() s:set(-4) s:next()
box.schema.sequence.alter('s', {name = 's2', max = 100})
s:reset()
local d = box.schema.sequence.create('d', {step = -1})
d:next() d:set(-2^40)
local t = box.schema.space.create('t')
t:create_index('pk', {sequence = true})
t:insert{box.NULL, 'a'} t:insert{10} t:replace{box.NULL} t:insert{2^40}
box.sequence.t_seq:next()
local u = box.schema.space.create('u', {format = {{'a', 'string'}, {'b', 'integer'}}})
u:create_index('pk', {parts = {'a', 'b'}, sequence = {id = 's2', field = 'b'}})
u:insert{'x', box.NULL}
u.index.pk:alter({sequence = true})
u:insert{'x', box.NULL}
u.index.pk:alter({sequence = false})
t.index.pk:alter({sequence = 's2'})
t:replace{box.NULL, 'b'}
box.snapshot()
t.index.pk:alter({sequence = true})
box.sequence.t_seq:set(2^41)
t:insert{box.NULL, 'after the snapshot'}
os.exit(0)
"""


def _rows(directory, ext) -> list[tuple[int, bytes]]:
    out = []
    for path in sorted(glob.glob(os.path.join(directory, f"*.{ext}"))):
        with XlogReader(path) as reader:
            for tx in reader.transactions():
                out.extend((row.type, bytes(row.body)) for row in tx)
    return out


def _decoded(rows: list[tuple[int, bytes]]) -> list[tuple]:
    out = []
    for rtype, body in rows:
        req = decode_dml_body(body, rtype)
        out.append((rtype, req.space_id, req.index_id, req.key, req.tuple, req.ops))
    return out


def _snapshot_rows(directory) -> list[tuple[int, bytes]]:
    """The last snapshot's rows of the sequence spaces and the user spaces, in no
    particular order (2.6.0 writes `_sequence_data` in its hash table's order)."""
    path = sorted(glob.glob(os.path.join(directory, "*.snap")))[-1]
    out = []
    with XlogReader(path) as reader:
        for tx in reader.transactions():
            for row in tx:
                space_id = decode_dml_body(row.body, row.type).space_id
                if space_id in (284, 285, 340) or space_id >= 512:
                    out.append((row.type, bytes(row.body)))
    return sorted(out)


DROPS = """
box.cfg{log_level = 1}
io.stdout:setvbuf('no')
local s = box.schema.space.create('s')
s:create_index('pk', {sequence = true})
box.schema.sequence.create('q')
local t = box.schema.space.create('t')
t:create_index('pk', {sequence = 'q'})
s:insert{box.NULL} t:insert{box.NULL} t:insert{box.NULL}
box.schema.sequence.create('w')
box.sequence.w:next() box.sequence.w:next()
local u = box.schema.space.create('u')
u:create_index('pk', {sequence = 'w'})
box.schema.user.create('reader')
box.schema.user.grant('reader', 'read,write', 'sequence', 'w')
print(pcall(box.schema.sequence.drop, 's_seq'))
print(pcall(box.schema.sequence.drop, 'q'))
print(pcall(function() box.sequence.q:drop() end))
print(pcall(function() box.space._sequence:delete{box.sequence.q.id} end))
print(pcall(box.sequence.q.current, box.sequence.q), box.sequence.q:next(), t:insert{box.NULL})
print(pcall(box.schema.sequence.drop, 'w'))
print(pcall(box.sequence.w.current, box.sequence.w), u:insert{box.NULL})
print(#box.space._priv:select{box.space._user.index.name:get{'reader'}[1]})
print(s:insert{box.NULL})
t:drop()
print(pcall(box.schema.sequence.drop, 'q'))
s:drop()
print(box.sequence.s_seq)
box.schema.sequence.create('r')
box.sequence.r:next()
box.sequence.r:drop()
box.begin()
print(pcall(box.schema.sequence.drop, 'w'))
box.rollback()
print(pcall(box.sequence.w.current, box.sequence.w))
os.exit(0)
"""


def test_refused_and_done_drops_as_2_6_0(tmp_path):
    real, ours = both(DROPS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    assert "the sequence is in use" in real.stdout
    theirs, mine = _rows(tmp_path / "tarantool", "xlog"), _rows(tmp_path / "spindle", "xlog")
    assert _decoded(mine) == _decoded(theirs)
    assert mine == theirs


# next() and set() inside transactions (Spindle's one-frame statement) and outside,
# a rollback, a user's trigger on `_sequence_data`, box.stat()
NEXT_IN_TXN = """
box.cfg{log_level = 1}
io.stdout:setvbuf('no')
local q = box.schema.sequence.create('q', {step = 2})
local replaces = box.stat().REPLACE.total
box.begin() q:next() q:next() q:set(10) q:next() box.commit()
print(q:current(), box.stat().REPLACE.total - replaces)
box.begin() q:next() q:next() box.rollback()
print(q:current(), #box.space._sequence_data:select{})
print(box.space._sequence_data:get{q.id})
q:next()
local seen = {}
box.space._sequence_data:on_replace(function(old, new) table.insert(seen, new[2]) end)
box.begin() q:next() q:next() box.commit()
print(table.concat(seen, ' '), q:current())
box.space._sequence_data:before_replace(function(old, new) return box.tuple.new{new[1], new[2] + 1000} end)
box.begin() print(q:next()) box.commit()
print(q:current(), box.space._sequence_data:get{q.id})
os.exit(0)
"""


def test_next_in_transactions_as_2_6_0(tmp_path):
    real, ours = both(NEXT_IN_TXN, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    theirs, mine = _rows(tmp_path / "tarantool", "xlog"), _rows(tmp_path / "spindle", "xlog")
    assert mine == theirs


def test_wal_and_snapshot_rows_are_2_6_0s(tmp_path):
    real, ours = both(ROWS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    theirs, mine = _rows(tmp_path / "tarantool", "xlog"), _rows(tmp_path / "spindle", "xlog")
    assert any(decode_dml_body(body, rtype).space_id == 340 for rtype, body in mine)
    assert _decoded(mine) == _decoded(theirs)
    assert mine == theirs                     # byte for byte
    snap_theirs = _snapshot_rows(tmp_path / "tarantool")
    assert any(decode_dml_body(b, t).space_id == 285 for t, b in snap_theirs)
    assert _snapshot_rows(tmp_path / "spindle") == snap_theirs


# --------------------------------------------------- data dirs both ways

MAKE = """
box.cfg{log_level = 1}
local s = box.schema.sequence.create('s', {start = 5})
local s2 = box.schema.sequence.create('s2', {step = -1})
s:next() s:next() s2:next()
local t = box.schema.space.create('t')
t:create_index('pk', {sequence = true})
t:insert{box.NULL, 'a'} t:insert{box.NULL, 'b'}
local u = box.schema.space.create('u')
u:create_index('pk', {parts = {{1, 'string'}, {2, 'unsigned'}}, sequence = {field = 2}})
u:insert{'k', box.NULL}
box.snapshot()
t:insert{box.NULL, 'c'} t:insert{20} s:next() s2:set(-100) u:insert{'k', 40}
os.exit(0)
"""

REOPEN = """
box.cfg{log_level = 1}
print(box.space.t:insert{box.NULL, 'd'}, box.space.u:insert{'k', box.NULL})
print(box.sequence.t_seq:current(), box.sequence.s:current(), box.sequence.s2:current())
print(box.sequence.s:next(), box.sequence.s2:next())
print(box.space.t.index.pk.sequence_id, box.space.u.index.pk.sequence_fieldno)
box.snapshot()
print(box.space.t:insert{box.NULL, 'e'})
os.exit(0)
"""

AGAIN = """
box.cfg{log_level = 1}
print(box.space.t:insert{box.NULL, 'f'}, box.sequence.s:next(), box.sequence.s2:next())
os.exit(0)
"""


def test_each_data_dir_opened_by_the_other(tmp_path):
    """A 2.6.0 data dir with sequences (snapshot + WAL) keeps auto-incrementing from
    where it was under Spindle, and the reverse; then again after a snapshot."""
    made = both(MAKE, tmp_path)
    assert [r.returncode for r in made] == [0, 0], [r.stderr for r in made]
    outputs = {}
    for directory, binary in (("tarantool", SPINDLE), ("spindle", tarantool_binary())):
        copy = tmp_path / f"{directory}-copy"
        shutil.copytree(tmp_path / directory, copy)
        first = run_script(binary, REOPEN, copy, "reopen.lua")
        assert first.returncode == 0, first.stderr
        again = run_script(binary, AGAIN, copy, "again.lua")
        assert again.returncode == 0, again.stderr
        outputs[directory] = first.stdout + again.stdout
    assert outputs["tarantool"] == outputs["spindle"]
    assert outputs["tarantool"].startswith("[21, 'd']\t['k', 41]\n21LL\t7LL\t-100LL\n8\t-101\n")


# ------------------------------------------------------------- over IPROTO

SERVER = """
box.cfg{log_level = 1}
box.schema.user.create('u', {password = 'pw'})
local s = box.schema.sequence.create('s', {start = 10})
local t = box.schema.space.create('t')
t:create_index('pk', {sequence = 's'})
local g = box.schema.space.create('g')
g:create_index('pk', {sequence = true})
box.schema.user.grant('u', 'read,write', 'space', 't')
box.schema.user.grant('u', 'read,write', 'space', 'g')
box.schema.user.create('a', {password = 'pw'})
box.schema.user.grant('a', 'super')
box.cfg{listen = '127.0.0.1:' .. arg[1]}
"""


def test_iproto_inserts_and_sequence_access_as_2_6_0(tmp_path):
    """Through the connector: a nil key auto-increments, an attached sequence needs
    write on it (the generated one goes with the space's rights), an explicit key
    needs it too, and an error leaves the value where it went."""
    import tarantool

    def scenario(port):
        out = []
        conn = tarantool.Connection("127.0.0.1", port, user="u", password="pw")
        admin = tarantool.Connection("127.0.0.1", port, user="a", password="pw")
        for space, tup in (("g", (None, "generated")), ("g", (7, "explicit")),
                           ("g", (None, "after")), ("t", (None, "attached")),
                           ("t", (3, "explicit"))):
            try:
                out.append(conn.insert(space, tup).data)
            except tarantool.error.DatabaseError as exc:
                out.append([exc.args[0], exc.args[1]])
        out.append(admin.eval("box.session.su('admin', box.schema.user.grant, 'u', 'write', "
                              "'sequence', 's')").data)
        out.append(conn.insert("t", (None, "granted")).data)
        out.append(conn.replace("t", (None, "replaced")).data)
        try:
            conn.insert("t", (11, "duplicate"))
        except tarantool.error.DatabaseError as exc:
            out.append([exc.args[0], exc.args[1]])
        out.append(admin.eval("return box.sequence.s:current(), "
                              "box.sequence.g_seq:current()").data)
        conn.close()
        admin.close()
        return out

    real, ours = serve_both(SERVER, tmp_path, scenario)
    assert real[0] == [[1, "generated"]] and real[3][0] == 42
    assert ours == real
