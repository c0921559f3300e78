"""UPDATE and UPSERT operations on JSON paths against 2.6.0 (issue 23): '=', '+',
'-', '&', ':', '!', '#' at `field.a.b`, `[2].x`, `f.arr[3]`, `f["a"]`; field names
from the format as the first token (a name with a dot in it wins whole); the errors
for bad paths (invalid JSON and its position, at decode for the first token and when
applied for the rest), missing keys and items, containers of the wrong kind, double
updates; the key order of the maps in the stored tuples (read from the snapshot) and
the UPDATE/UPSERT rows of the WAL, which carry the operations as given.

(Cases where 2.6.0 crashes — a path below a field or a path updated before in the
same request — are left out.)"""
from __future__ import annotations

from pathlib import Path

from spindle.core.iproto.constants import IprotoType
from spindle.core.xlog.format import decode_file

from .oracle import both

PRELUDE = """
box.cfg{log_level = 1}
io.stdout:setvbuf('no')
-- a value as text with map keys sorted (Lua tables keep no order)
local function show(v)
    if type(v) == 'cdata' and v.totable then v = v:totable() end
    if type(v) ~= 'table' then return tostring(v) end
    local keys, n = {}, 0
    for k in pairs(v) do table.insert(keys, k) n = n + 1 end
    if n == #v then
        local out = {}
        for i = 1, #v do out[i] = show(v[i]) end
        return '[' .. table.concat(out, ',') .. ']'
    end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local out = {}
    for _, k in ipairs(keys) do table.insert(out, tostring(k) .. ':' .. show(v[k])) end
    return '{' .. table.concat(out, ',') .. '}'
end
local s = box.schema.space.create('s', {format = {{'id', 'unsigned'}, {'f'}, {'g'}, {'a.b'}}})
s:create_index('pk')
local base = {1, {a = {b = 1, c = {1, 2, 3}}, arr = {10, 20, 30}, s = 'str'},
              {1, {2, 3}, {x = 5}}, 'dotted', 9}
function try(name, ops)
    s:replace(base)
    local ok, r = pcall(s.update, s, 1, ops)
    if ok then print(name, 'ok', show(r)) else print(name, 'err', tostring(r), r.code) end
end
"""

CASES = PRELUDE + """
try('set_deep', {{'=', 'f.a.b', 2}})
try('set_new_key', {{'=', 'f.a.z', 2}})
try('set_idx', {{'=', '[2].a.b', 7}})
try('set_idx2', {{'=', '[3][2][1]', 7}})
try('set_arr_append', {{'=', '[3][4]', 7}})
try('set_arr_far', {{'=', '[3][6]', 7}})
try('add', {{'+', '[2].a.b', 1}})
try('add_float', {{'+', 'f.a.b', 1.5}})
try('sub', {{'-', 'f.arr[2]', 5}})
try('bitand', {{'&', 'f.arr[2]', 4}})
try('splice', {{':', 'f.s', 1, 1, 'XX'}})
try('insert', {{'!', 'f.arr[2]', 15}})
try('insert_end', {{'!', 'f.arr[4]', 40}})
try('insert_far', {{'!', 'f.arr[5]', 40}})
try('insert_key', {{'!', 'f.a.new', 40}})
try('insert_key_exists', {{'!', 'f.a.b', 40}})
try('delete', {{'#', 'f.arr[1]', 1}})
try('delete_many', {{'#', 'f.arr[2]', 5}})
try('delete_key', {{'#', 'f.a.b', 1}})
try('delete_keys', {{'#', 'f.a.b', 2}})
try('delete_missing_key', {{'#', 'f.a.zz', 1}})
try('delete_zero', {{'#', 'f.arr[1]', 0}})
try('missing_key_on_the_way', {{'=', 'f.q.b', 1}})
try('missing_item_on_the_way', {{'=', 'f.arr[7][1]', 1}})
try('key_in_scalar', {{'=', 'f.s.x', 1}})
try('index_in_map', {{'=', 'f.a[1]', 1}})
try('key_in_array', {{'=', 'f.arr.x', 1}})
try('index_in_map_top', {{'=', 'f[1]', 1}})
try('add_string', {{'+', 'f.s', 1}})
try('add_missing', {{'+', 'f.a.zz', 1}})
try('splice_number', {{':', 'f.a.b', 1, 1, 'x'}})
try('unknown_field', {{'=', 'zz.a', 1}})
try('unknown_name', {{'=', 'zz', 1}})
try('dotted_name', {{'=', 'a.b', 1}})
try('field_far', {{'=', '[9].a', 1}})
try('quoted', {{'=', 'f["a"]["b"]', 3}})
try('quoted_single', {{'=', "f['a'].c[2]", 3}})
try('leading_dot', {{'=', '.f', 1}})
try('bracket_field', {{'=', '[2]', 1}})
try('deep_insert', {{'!', 'f.a.c[1]', 0}})
try('deep_delete_all', {{'#', 'f.a.c[1]', 3}})
try('deep_delete_more', {{'#', 'f.a.c[2]', 5}})
try('twice', {{'=', 'f.a.b', 1}, {'=', 'f.a.b', 2}})
try('twice_arith', {{'+', 'f.a.b', 1}, {'+', 'f.a.b', 2}})
try('insert_twice', {{'!', 'f.arr[1]', 2}, {'!', 'f.arr[1]', 5}})
try('delete_then_set', {{'#', 'f.arr[1]', 1}, {'=', 'f.arr[1]', 5}})
try('child_then_parent', {{'=', 'f.a.b', 2}, {'=', 'f.a', 5}})
try('child_then_parent_array', {{'=', '[3][2][1]', 2}, {'=', '[3][2]', 5}})
try('siblings', {{'=', 'f.a.b', 2}, {'+', 'f.arr[1]', 1}, {'=', 'f.s', 'z'}})
try('sibling_keys', {{'=', 'f.a.b', 2}, {'=', 'f.a.z', 5}})
try('two_fields', {{'=', 'f.a.b', 2}, {'=', 'g[1]', 5}})
try('path_then_field', {{'=', 'f.a.b', 2}, {'=', 2, 5}})
try('path_then_delete_field', {{'=', 'f.a.b', 2}, {'#', 2, 1}})
try('path_then_insert_before', {{'=', 'f.a.b', 2}, {'!', 2, 5}})
try('path_then_insert_after', {{'=', 'f.a.b', 2}, {'!', 3, 5}})
try('path_then_delete_before', {{'=', '[3][1]', 2}, {'#', 2, 1}})
try('array_paths', {{'=', '[3][1]', 5}, {'=', '[3][2][1]', 6}})
try('array_same_prefix', {{'+', '[3][2][1]', 5}, {'+', '[3][2][2]', 6}})
try('shifted', {{'!', 'f.arr[1]', 2}, {'=', 'f.arr[2]', 5}})
try('path_error_first', {{'=', 'f..a', 1}, {'bad'}})
try('name_error_first', {{'=', 'zz.a', 1}, {'bad'}})
try('missing_then_bad_op', {{'=', '[9].a', 1}, {'bad'}})
for _, p in ipairs({'f.', 'f[', 'f[1', 'f["a"', 'f[a]', 'f.1a', 'f[1]x', ' f', 'f.a b',
                    '[2', '[2].', 'f.arr[0]', '[0]', '[-1]', '[-1].a', '[2]a', 'f."a"',
                    'f.a["b"', 'f..a', 'f.arr[*]', '[*]', '[ 2 ]'}) do
    try('path ' .. p, {{'=', p, 1}})
    try('path first ' .. p, {{'=', p, 1}, {'bad'}})
end
-- UPSERT: an operation that fails is skipped, a malformed one fails the request
s:replace(base)
s:upsert(base, {{'+', 'f.a.b', 10}, {'=', 'f.zz.y', 1}, {'!', 'f.arr[1]', 0}})
print('upsert', show(s:get{1}))
print('upsert bad', pcall(s.upsert, s, base, {{'=', ' f', 1}}))
s:delete{1}
s:upsert(base, {{'=', 'f.a.b', 10}})
print('upsert insert', show(s:get{1}))
os.exit(0)
"""


def test_path_updates_as_2_6_0(tmp_path):
    real, ours = both(CASES, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == real.stdout.splitlines()
    assert "invalid JSON in position" in real.stdout


# Map key order: read back from the snapshot, as MsgPack keeps it.
ORDER = """
box.cfg{log_level = 1}
local s = box.schema.space.create('s')
s:create_index('pk')
local id = 0
local function case(ops)
    id = id + 1
    s:replace(box.tuple.new{id, setmetatable({}, {__serialize = 'map'}), {1, {k = 1}}})
    for _, k in ipairs({'e', 'd', 'c', 'b', 'a'}) do s:update(id, {{'=', '[2].' .. k, k}}) end
    s:update(id, ops)
end
case({{'=', '[2].a', 'A'}})
case({{'=', '[2].c', 2}})
case({{'=', '[2].x', 1}})
case({{'!', '[2].x', 1}})
case({{'#', '[2].c', 1}})
case({{'=', '[2].x', 1}, {'=', '[2].c', 2}})
case({{'=', '[2].c', 2}, {'=', '[2].x', 1}})
case({{'=', '[2].c', 2}, {'=', '[2].e', 3}})
case({{'=', '[2].e', 3}, {'=', '[2].c', 2}})
case({{'=', '[2].c', 2}, {'=', '[2].a', 3}})
case({{'=', '[2].b', 2}, {'=', '[2].d', 3}})
case({{'=', '[2].d', 2}, {'=', '[2].b', 3}})
case({{'=', '[2].c', 2}, {'#', '[2].e', 1}})
case({{'#', '[2].c', 1}, {'#', '[2].a', 1}})
case({{'!', '[2].x', 1}, {'=', '[2].c', 2}})
case({{'=', '[2].b', 2}, {'=', '[2].d', 3}, {'=', '[2].y', 4}})
case({{'=', '[2].b', 2}, {'=', '[2].d', 3}, {'=', '[2].c', 4}})
case({{'=', '[2].b', 2}, {'=', '[3][2].z', 3}, {'=', '[2].d', 3}})
case({{'=', '[3][2].z', 3}, {'=', '[3][2].k', 4}, {'=', '[3][2].y', 5}})
s:upsert({100}, {{'=', '[2].x', 1}})
s:upsert({1}, {{'=', '[2].q', 1}, {'+', '[3][1]', 1}})
box.snapshot()
os.exit(0)
"""


def _space_rows(directory: Path, suffix: str) -> list:
    rows = []
    for path in sorted(directory.glob(f"*.{suffix}")):
        for row in decode_file(path.read_bytes()).rows:
            body = row.body_map()
            if isinstance(body, dict) and body.get(0x10) == 512:
                rows.append((row.type, row.body))
    return rows


def test_map_key_order_and_wal_rows_as_2_6_0(tmp_path):
    real, ours = both(ORDER, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    # the stored tuples byte for byte (MsgPack keeps the map key order)
    snapshot = _space_rows(tmp_path / "tarantool", "snap")
    assert len(snapshot) == 20          # (the 19 cases and an upsert that inserted)
    assert _space_rows(tmp_path / "spindle", "snap") == snapshot
    # the WAL: the UPDATE and UPSERT rows carry the operations as given
    wal = _space_rows(tmp_path / "tarantool", "xlog")
    assert [t for t, _ in wal].count(IprotoType.UPDATE) > 19
    assert IprotoType.UPSERT in [t for t, _ in wal]
    assert _space_rows(tmp_path / "spindle", "xlog") == wal
