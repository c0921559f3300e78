"""Index kinds and parts of 2.6.0 (issue 23 item 4) against the real Tarantool 2.6.0
binary: the same Lua on both, every printed line compared (results, errors, index
objects, `_index` rows). JSON path parts (nested maps and arrays, nullable ones, the
format's errors for tuples without the path or with a container of the wrong kind,
conflicting paths, invalid paths), multikey parts ('[*]', 'data[*].name': an entry per
element, pairs() across chunks, 2.6.0's errors for elements and definitions), BITSET (its iterators and id order) and RTREE
(points, boxes, dimension, distance, every iterator), collations (unicode, unicode_ci,
binary, none and locale ones: the order of a set of strings, equal keys, duplicates),
nullable parts (unique keys with nils, searches by nil, the refusals of nullable primary
and HASH keys, altering to non-nullable over nils).

Left out: updates by a JSON path ('[2].a.b'), which Spindle's update does not take.
"""
from __future__ import annotations

from .oracle import both

PRELUDE = """
box.cfg{log_level = 1}
local function show(v)
    if v == nil then return 'nil' end   -- (box.NULL too)
    if type(v) == 'table' or type(v) == 'cdata' and v.totable then
        if type(v) == 'cdata' then v = v:totable() end
        local keys = {}
        for k in pairs(v) do table.insert(keys, k) end
        table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
        local out = {}
        for _, k in ipairs(keys) do table.insert(out, tostring(k) .. '=' .. show(v[k])) end
        return '{' .. table.concat(out, ',') .. '}'
    end
    return tostring(v)
end
local function try(label, f, ...)
    local ok, e = pcall(f, ...)
    print(label, ok and 'ok' or 'err', ok and show(e) or tostring(e))
end
"""

JSON_PATHS = PRELUDE + """
local s = box.schema.space.create('j')
s:create_index('pk')
try('jp', function() return s:create_index('jp', {parts = {{2, 'string', path = 'a.b'}}}).parts end)
try('i1', function() return s:insert{1, {a = {b = 'x'}}} end)
try('i2', function() return s:insert{2, {a = {b = 5}}} end)
try('i3', function() return s:insert{3, {a = {c = 'y'}}} end)
try('i4', function() return s:insert{4, {a = 7}} end)
try('i5', function() return s:insert{5} end)
try('i6', function() return s:insert{6, 'str'} end)
try('i7', function() return s:insert{7, {a = {b = 'x'}}} end)
try('i8', function() return s:insert{8, {a = {b = 'a'}, z = 1}} end)
try('sel', function() return s.index.jp:select() end)
try('sel x', function() return s.index.jp:select('x') end)
try('row', function() return box.space._index:get{s.id, 1} end)
try('jn', function() return s:create_index('jn', {parts = {{2, 'string', path = 'a.c',
    is_nullable = true}}, unique = false}).parts end)
try('i9', function() return s:insert{9, {a = {b = 'q', c = 'w'}}} end)
try('jn sel', function() return s.index.jn:select() end)
try('jn sel w', function() return s.index.jn:select('w') end)
try('arr', function() return s:create_index('arr', {parts = {{3, 'unsigned', path = '[2]'}},
    unique = false}).parts end)
try('i10', function() return s:insert{10, {a = {b = 'r'}}, {5, 6}} end)
try('i11', function() return s:insert{11, {a = {b = 's'}}, {5}} end)
try('i12', function() return s:insert{12, {a = {b = 't'}}, {a = 1}} end)
try('bad', function() return s:create_index('bad', {parts = {{2, 'unsigned', path = 'a'}}}) end)
try('bad2', function() return s:create_index('bad2', {parts = {{2, 'string', path = 'a..b'}}}) end)
try('hash', function() return s:create_index('h', {parts = {{2, 'string', path = 'a.b'}},
    type = 'HASH'}).parts end)
try('hash get', function() return s.index.h:get('q') end)
try('u1', function() return s:update(1, {{'=', 2, {a = {b = 5}}}}) end)
try('u2', function() return s:update(1, {{'=', 2, {a = {b = 'zz'}}}}) end)
try('r1', function() return s:replace{8, {a = {b = 'zz'}}} end)
try('d1', function() return s.index.jp:delete('zz') end)
try('all', function() return s.index.jp:select() end)
try('names', function()
    local t = box.schema.space.create('t', {format = {{'id', 'unsigned'}, {'doc', 'map'}}})
    t:create_index('pk')
    return t:create_index('n', {parts = {{'doc.name', 'string'}}}).parts
end)
try('by name', function() return box.space.t:insert{1, {name = 'n1'}} end)
try('by name sel', function() return box.space.t.index.n:select('n1') end)
try('by name bad', function() return box.space.t:insert{2, {name = 1}} end)
try('pk path', function()
    local p = box.schema.space.create('p')
    return p:create_index('pk', {parts = {{1, 'unsigned', path = 'id'}}}).parts
end)
try('pk ins', function() return box.space.p:insert{{id = 3}} end)
try('pk get', function() return box.space.p:get(3) end)
try('pk miss', function() return box.space.p:insert{{}} end)
os.exit(0)
"""

INDEX_KINDS = PRELUDE + """
local s = box.schema.space.create('b')
s:create_index('pk')
try('bitset', function() return s:create_index('bs', {type = 'bitset', parts = {2, 'unsigned'}, unique = false}).parts end)
try('bitset u', function() return s:create_index('bsu', {type = 'bitset', parts = {2, 'unsigned'}}) end)
try('bitset mp', function() return s:create_index('bsm', {type = 'bitset', parts = {2, 'unsigned', 1, 'unsigned'}, unique = false}) end)
try('bitset t', function() return s:create_index('bst', {type = 'bitset', parts = {2, 'integer'}, unique = false}) end)
for i = 1, 12 do s:insert{i, i} end
s:delete{3} s:delete{7} s:insert{13, 5} s:insert{14, 6}
for _, it in ipairs({'ALL', 'EQ', 'BITS_ALL_SET', 'BITS_ANY_SET', 'BITS_ALL_NOT_SET', 'GT', 'LE'}) do
    try(it, function() return s.index.bs:select(5, {iterator = it}) end)
end
try('bits all', function() return s.index.bs:select() end)
try('bits count', function() return s.index.bs:count(4, {iterator = 'BITS_ANY_SET'}) end)
try('bits len', function() return s.index.bs:len() end)
try('bits pairs', function() local r = {} for _, t in s.index.bs:pairs(2, {iterator = 'BITS_ALL_SET'}) do table.insert(r, t[1]) end return r end)
try('bits min', function() return s.index.bs:min() end)
try('bits get', function() return s.index.bs:get(5) end)
try('bits key', function() return s.index.bs:select('x', {iterator = 'EQ'}) end)
local c = box.schema.space.create('c')
c:create_index('pk')
try('bitset s', function() return c:create_index('bs', {type = 'bitset', parts = {2, 'string'}, unique = false}).parts end)
c:insert{1, 'a'} c:insert{2, 'b'} c:insert{3, 'c'} c:insert{4, 'ab'}
try('bss', function() return c.index.bs:select('a', {iterator = 'BITS_ALL_SET'}) end)
try('bss2', function() return c.index.bs:select('\x01', {iterator = 'BITS_ANY_SET'}) end)
local r = box.schema.space.create('r')
r:create_index('pk')
try('rtree', function() return r:create_index('rt', {type = 'rtree', parts = {2, 'array'}, unique = false}).parts end)
try('rtree u', function() return r:create_index('rtu', {type = 'rtree', parts = {2, 'array'}}) end)
try('rtree t', function() return r:create_index('rtt', {type = 'rtree', parts = {2, 'unsigned'}, unique = false}) end)
try('rtree3', function() return r:create_index('rt3', {type = 'rtree', parts = {3, 'array'}, dimension = 3, distance = 'manhattan', unique = false}).parts end)
r:insert{1, {0, 0}, {0, 0, 0}} r:insert{2, {1, 1}, {1, 1, 1}} r:insert{3, {2, 2, 5, 5}, {2, 2, 2}}
r:insert{4, {-3, 4}, {3, 0, 0, 4, 1, 1}} r:insert{5, {10, 10}, {5, 5, 5}}
try('rbad', function() return r:insert{6, {1}, {1, 1, 1}} end)
try('rbad2', function() return r:insert{6, {1, 'a'}, {1, 1, 1}} end)
for _, it in ipairs({'ALL', 'EQ', 'GT', 'GE', 'LT', 'LE', 'OVERLAPS', 'NEIGHBOR', 'REQ'}) do
    try(it, function() return r.index.rt:select({0, 0, 3, 3}, {iterator = it}) end)
    try(it .. ' p', function() return r.index.rt:select({1, 1}, {iterator = it}) end)
end
try('r3 n', function() return r.index.rt3:select({0, 0, 0}, {iterator = 'NEIGHBOR'}) end)
try('r3 o', function() return r.index.rt3:select({0, 0, 0, 3, 3, 3}, {iterator = 'LE'}) end)
try('r key', function() return r.index.rt:select({1}, {iterator = 'EQ'}) end)
try('r key2', function() return r.index.rt:select(1, {iterator = 'EQ'}) end)
try('r key3', function() return r.index.rt:select({1, 2}, {iterator = 'EQ'}) end)
try('r count', function() return r.index.rt:count({0, 0, 3, 3}, {iterator = 'LE'}) end)
try('r len', function() return r.index.rt:len() end)
try('r max', function() return r.index.rt:max() end)
r:delete{2}
try('after del', function() return r.index.rt:select() end)
try('idx row', function() return box.space._index:select{r.id} end)
os.exit(0)
"""


def _lines(proc) -> list[str]:
    return [line for line in proc.stdout.splitlines() if "\t" in line]


def test_json_path_parts_as_2_6_0(tmp_path):
    real, ours = both(JSON_PATHS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(_lines(real)) > 30
    assert _lines(ours) == _lines(real)


def test_bitset_and_rtree_as_2_6_0(tmp_path):
    real, ours = both(INDEX_KINDS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(_lines(real)) > 50
    assert _lines(ours) == _lines(real)


COLLATIONS = """
box.cfg{log_level = 1}
local words = {'a', 'A', 'b', 'B', 'ä', 'Ä', 'ab', 'aB', 'Ab', 'AB', 'abc', 'ß', 'ss', 'SS', 'é', 'e', 'E', 'ê', 'z', 'Z', '1', '10', '2', ' ', '-', '_', '!', 'a b', 'a-b', 'ab-', 'ǅ', 'æ', 'Æ', 'ø', 'å', 'ı', 'I', 'i', 'İ', 'я', 'Я', 'ё', 'е', '中', '日', 'ﬁ', 'fi', '', 'x\0y', 'co-op', 'coop', 'Co-op', 'résumé', 'resume', 'Résumé', '😀', 'ａ', 'Ω', 'ω', 'Ω'}
for _, coll in ipairs({'unicode', 'unicode_ci', 'binary', 'none', 'unicode_sv_s3', 'unicode_tr_s2', 'unicode_de__phonebook_s1', 'unicode_zh__pinyin_s3'}) do
    local s = box.schema.space.create('s_' .. coll)
    s:create_index('pk')
    s:create_index('c', {parts = {{2, 'string', collation = coll}}, unique = false})
    for i, w in ipairs(words) do s:insert{i, w} end
    local out = {}
    for _, t in s.index.c:pairs() do table.insert(out, t[1]) end
    print(coll, table.concat(out, ' '))
    local eq = {}
    for i, w in ipairs(words) do
        eq[#eq + 1] = s.index.c:count(w)
    end
    print(coll .. ' eq', table.concat(eq, ' '))
    local u = box.schema.space.create('u_' .. coll)
    u:create_index('pk')
    u:create_index('c', {parts = {{2, 'string', collation = coll}}})
    local dups = {}
    for i, w in ipairs(words) do
        local ok = pcall(u.insert, u, {i, w})
        if not ok then table.insert(dups, i) end
    end
    print(coll .. ' dups', table.concat(dups, ' '))
end
os.exit(0)
"""


def test_collations_as_2_6_0(tmp_path):
    real, ours = both(COLLATIONS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(_lines(real)) == 24
    assert _lines(ours) == _lines(real)


MULTIKEY = PRELUDE + """
local s = box.schema.space.create('m')
try('pk mk', function() return s:create_index('pk', {parts = {{2, 'unsigned', path = '[*]'}}}) end)
s:create_index('pk')
try('mk', function() return s:create_index('mk', {parts = {{2, 'unsigned', path = '[*]'}}}).parts end)
try('i1', function() return s:insert{1, {1, 2, 3}} end)
try('i2', function() return s:insert{2, {3, 4}} end)
try('i3', function() return s:insert{3, {5, 5}} end)
try('i4', function() return s:insert{4, {}} end)
try('i5', function() return s:insert{5, {6, 'x'}} end)
try('i6', function() return s:insert{6, 7} end)
try('i7', function() return s:insert{7} end)
try('i8', function() return s:insert{8, {a = 1}} end)
try('i9', function() return s:insert{9, {9, box.NULL}} end)
try('all', function() return s.index.mk:select() end)
try('eq', function() return s.index.mk:select(2) end)
try('ge', function() return s.index.mk:select(2, {iterator = 'GE'}) end)
try('lt', function() return s.index.mk:select(4, {iterator = 'LT'}) end)
try('count', function() return s.index.mk:count() end)
try('len', function() return s.index.mk:len() end)
try('get', function() return s.index.mk:get(4) end)
try('min', function() return s.index.mk:min() end)
try('max', function() return s.index.mk:max() end)
try('pairs', function() local r = {} for _, t in s.index.mk:pairs(1, {iterator = 'GE'}) do table.insert(r, t[1]) end return r end)
try('upd', function() return s:update(1, {{'=', 2, {10, 11}}}) end)
try('dup', function() return s:insert{10, {11}} end)
try('del', function() return s.index.mk:delete(11) end)
try('all2', function() return s.index.mk:select() end)
try('hash', function() return s:create_index('h', {type = 'hash', parts = {{2, 'unsigned', path = '[*]'}}}) end)
try('two', function() return s:create_index('two', {parts = {{2, 'unsigned', path = '[*]'}, {3, 'unsigned', path = '[*]'}}}) end)
local t = box.schema.space.create('t')
t:create_index('pk')
try('mk2', function() return t:create_index('mk', {parts = {{2, 'string', path = 'data[*].name'}, {1, 'unsigned'}}, unique = false}).parts end)
try('mk2 nn', function() return t:create_index('mkn', {parts = {{2, 'unsigned', path = 'data[*].n', is_nullable = true}}, unique = false}).parts end)
try('t1', function() return t:insert{1, {data = {{name = 'a', n = 1}, {name = 'b'}}}} end)
try('t2', function() return t:insert{2, {data = {{name = 'b', n = 2}}}} end)
try('t3', function() return t:insert{3, {data = {{n = 3}}}} end)
try('t4', function() return t:insert{4, {data = {{name = 5}}}} end)
try('t5', function() return t:insert{5, {data = 7}} end)
try('t6', function() return t:insert{6, {x = 1}} end)
try('tall', function() return t.index.mk:select() end)
try('tb', function() return t.index.mk:select('b') end)
try('tn', function() return t.index.mkn:select() end)
try('tn nil', function() return t.index.mkn:select(box.NULL) end)
os.exit(0)
"""


def test_multikey_parts_as_2_6_0(tmp_path):
    real, ours = both(MULTIKEY, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(_lines(real)) > 35
    assert _lines(ours) == _lines(real)


NULLABLE = PRELUDE + """
local s = box.schema.space.create('n')
s:create_index('pk')
try('nu', function() return s:create_index('nu', {parts = {{2, 'unsigned', is_nullable = true}}}).parts end)
try('nm', function() return s:create_index('nm', {parts = {{3, 'string', is_nullable = true}, {4, 'unsigned', is_nullable = true}}, unique = false}).parts end)
try('i1', function() return s:insert{1, box.NULL, 'a', 1} end)
try('i2', function() return s:insert{2, box.NULL, box.NULL, 2} end)
try('i3', function() return s:insert{3, 5} end)
try('i4', function() return s:insert{4, 5} end)
try('i5', function() return s:insert{5, 6, 'a', box.NULL} end)
try('i6', function() return s:insert{6, box.NULL, 'a'} end)
try('i7', function() return s:insert{7, 'x'} end)
try('nu all', function() return s.index.nu:select() end)
try('nu nil', function() return s.index.nu:select(box.NULL) end)
try('nu nil eq', function() return s.index.nu:select({box.NULL}, {iterator = 'EQ'}) end)
try('nu get', function() return s.index.nu:get(5) end)
try('nu get nil', function() return s.index.nu:get(box.NULL) end)
try('nu lt', function() return s.index.nu:select({6}, {iterator = 'LT'}) end)
try('nu min', function() return s.index.nu:min() end)
try('nu max', function() return s.index.nu:max() end)
try('nm all', function() return s.index.nm:select() end)
try('nm a', function() return s.index.nm:select('a') end)
try('nm a nil', function() return s.index.nm:select({'a', box.NULL}) end)
try('nm nil', function() return s.index.nm:select({box.NULL, 2}) end)
try('nm ge', function() return s.index.nm:select({box.NULL}, {iterator = 'GT'}) end)
try('count', function() return s.index.nu:count(box.NULL) end)
try('pkn', function() local t = box.schema.space.create('t')
    return t:create_index('pk', {parts = {{1, 'unsigned', is_nullable = true}}}) end)
try('hashn', function() return s:create_index('h', {type = 'hash', parts = {{2, 'unsigned', is_nullable = true}}}) end)
try('notnull', function() return s:create_index('nn', {parts = {{2, 'unsigned'}}}) end)
try('fmt', function() return s:format({{'id', 'unsigned'}, {'a', 'unsigned', is_nullable = true}}) end)
try('fmt2', function() return s:format({{'id', 'unsigned'}, {'a', 'unsigned'}}) end)
try('alter', function() return s.index.nu:alter({parts = {{2, 'unsigned', is_nullable = false}}}) end)
try('d', function() return s:delete{1} end)
try('d2', function() s:delete{2} s:delete{6} return s.index.nu:alter({parts = {{2, 'unsigned', is_nullable = false}}}) end)
try('nu parts', function() return s.index.nu.parts end)
try('i8', function() return s:insert{8, box.NULL} end)
os.exit(0)
"""


def test_nullable_parts_as_2_6_0(tmp_path):
    real, ours = both(NULLABLE, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(_lines(real)) == 33
    assert _lines(ours) == _lines(real)


DEFINITION_ERRORS = PRELUDE + """
local s = box.schema.space.create('w')
s:create_index('pk')
local function create(name, opts)
    try(name, function() return s:create_index(name, opts).parts end)
end
create('b', {parts = {{1, 'unsigned'}, {5, 'string', path = 'a..b'}}})
create('c', {parts = {{5, 'string', path = '[0]'}}})
create('h', {parts = {{5, 'string', path = '1a'}}})
create('e', {parts = {{5, 'string', path = '["a"]'}, {5, 'string', path = 'a'}}})
create('twice', {parts = {{2, 'unsigned'}, {3, 'unsigned'}, {2, 'string'}}})
create('pk2', {parts = {{1, 'unsigned'}, {1, 'unsigned'}}})
create('d', {parts = {{5, 'string', path = '.a'}}})
create('f', {parts = {{5, 'string', path = 'a.b'}, {6, 'string', path = '[1][2]'}}})
create('g', {parts = {{6, 'unsigned', path = '[1][2]'}, {6, 'unsigned', path = '[1]'}}})
try('ins', function() return s:insert{1, 2, 3, 4, {a = 'x'}, {{1, 'y'}}} end)
try('ins2', function() return s:insert{2, 2, 3, 4, {a = {b = 'y'}}} end)
os.exit(0)
"""


def test_index_definition_errors_as_2_6_0(tmp_path):
    real, ours = both(DEFINITION_ERRORS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(_lines(real)) == 11
    assert _lines(ours) == _lines(real)


# BITSET and RTREE searches at the edges: empty, partial, long and malformed keys, an
# empty bit mask, random(), boxes given corner-swapped
EDGE_KEYS = """
box.cfg{log_level = 1}
local function try(label, f) local ok, e = pcall(f) if ok and type(e) == 'table' then e = #e end print(label, ok, tostring(e)) end
local s = box.schema.space.create('b')
s:create_index('pk')
s:create_index('bs', {type = 'bitset', parts = {2, 'unsigned'}})
s:create_index('rt', {type = 'rtree', parts = {3, 'array'}})
for i = 1, 5 do s:insert{i, i, {i, i}} end
try('b1', function() return s.index.bs:select(nil, {iterator = 'BITS_ALL_SET'}) end)
try('b2', function() return s.index.bs:select({}, {iterator = 'EQ'}) end)
try('b3', function() return s.index.bs:select({1, 2}, {iterator = 'EQ'}) end)
try('b4', function() return s.index.bs:count(1, {iterator = 'BITS_ANY_SET'}) end)
try('b5', function() return s.index.bs:select(0, {iterator = 'BITS_ALL_SET'}) end)
try('b6', function() return s.index.bs:select(0, {iterator = 'EQ'}) end)
try('b7', function() return s.index.bs:random(1) end)
try('r1', function() return s.index.rt:select(nil, {iterator = 'NEIGHBOR'}) end)
try('r2', function() return s.index.rt:select({1, 2, 3}, {iterator = 'EQ'}) end)
try('r3', function() return s.index.rt:select({{1, 2, 3}}, {iterator = 'EQ'}) end)
try('r4', function() return s.index.rt:select({{1, 'a'}}, {iterator = 'EQ'}) end)
try('r5', function() return s.index.rt:get({1, 1}) end)
try('r6', function() return s.index.rt:count({0, 0, 10, 10}, {iterator = 'LE'}) end)
try('r7', function() return s.index.rt:select({1, 1}) end)
try('r8', function() return s.index.rt:select({}, {iterator = 'LE'}) end)
try('r9', function() return s:insert{9, 9, {1, 2, 3}} end)
try('r10', function() return s:insert{9, 9} end)
try('r11', function() return s:insert{9, 9, {3, 4, 1, 2}}[1] end)
try('r12', function() return s.index.rt:select({2, 2, 3, 3}, {iterator = 'EQ'}) end)
try('r13', function() return s.index.rt:select({1, 2, 3, 4, 5}) end)
os.exit(0)
"""


def test_bitset_and_rtree_keys_at_the_edges_as_2_6_0(tmp_path):
    real, ours = both(EDGE_KEYS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(_lines(real)) == 20
    assert _lines(ours) == _lines(real)


# JSON paths against the space format and index alters over stored tuples
PATHS_AND_FORMAT = """
box.cfg{log_level = 1}
local s = box.schema.space.create('g')
s:create_index('pk')
s:create_index('p', {parts = {{2, 'string', path = 'a'}}})
print(pcall(s.format, s, {{'id', 'unsigned'}, {'doc', 'string'}}))
print(pcall(s.format, s, {{'id', 'unsigned'}, {'doc', 'map'}}))
print(pcall(s.format, s, {{'id', 'unsigned'}, {'doc', 'array'}}))
print(pcall(s.create_index, s, 'q', {parts = {{2, 'string'}}}))
print(pcall(s.create_index, s, 'r', {parts = {{2, 'unsigned', path = '[1]'}}}))
s:insert{1, {a = 'x'}}
print(pcall(s.create_index, s, 'u', {parts = {{2, 'unsigned', path = 'b'}}}))
print((pcall(s.create_index, s, 'v', {parts = {{2, 'unsigned', path = 'b', is_nullable = true}}})))
print(s.index.v ~= nil)
print(pcall(s.index.p.alter, s.index.p, {parts = {{2, 'string', path = 'z'}}}))
print(pcall(s.index.p.alter, s.index.p, {parts = {{2, 'string', path = 'a', is_nullable = true}}}))
print(#s.index.p:select())
os.exit(0)
"""


def test_json_paths_against_the_format_as_2_6_0(tmp_path):
    real, ours = both(PATHS_AND_FORMAT, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(real.stdout.splitlines()) == 11
    assert ours.stdout.splitlines() == real.stdout.splitlines()


# RTREE options as 2.6.0 reads them (distance of any index, case-insensitive; an
# integer dimension in [1, 20]), a one-axis RTREE, manhattan, truncate, EQ exact
RTREE_OPTIONS = """
box.cfg{log_level = 1}
local function ids(t) local o = {} for _, x in ipairs(t) do o[#o + 1] = x[1] end return table.concat(o, ' ') end
local r = box.schema.space.create('r')
r:create_index('pk')
print('t dist', pcall(function() return r:create_index('t1', {parts = {2, 'unsigned'}, distance = 'foo'}).name end))
print('t dim', pcall(function() return r:create_index('t2', {parts = {3, 'unsigned'}, dimension = 0}).name end))
print('r dist5', pcall(function() return r:create_index('r1', {type = 'rtree', parts = {4, 'array'}, unique = false, distance = 5}) end))
print('r dim -1', pcall(function() return r:create_index('r3', {type = 'rtree', parts = {5, 'array'}, unique = false, dimension = -1}) end))
print('r dim 21', pcall(function() return r:create_index('r3', {type = 'rtree', parts = {5, 'array'}, unique = false, dimension = 21}) end))
print('r dim 2.5', pcall(function() return r:create_index('r4', {type = 'rtree', parts = {6, 'array'}, unique = false, dimension = 2.5}) end))
print('raw', pcall(function() return box.space._index:insert{r.id, 50, 'raw', 'rtree', {distance = 'foo', unique = false}, {{7, 'array'}}} end))
print('raw2', pcall(function() return box.space._index:insert{r.id, 51, 'raw2', 'tree', {distance = 'foo'}, {{8, 'unsigned'}}} end))
print('raw3', pcall(function() return box.space._index:insert{r.id, 52, 'raw3', 'rtree', {dimension = 0, unique = false}, {{9, 'array'}}} end))
local s = box.schema.space.create('s')
s:create_index('pk')
print('one', pcall(function() return s:create_index('one', {type = 'rtree', parts = {2, 'array'}, unique = false, dimension = 1}).dimension end))
print('m', pcall(function() return s:create_index('m', {type = 'rtree', parts = {3, 'array'}, unique = false, distance = 'MANHATTAN'}).name end))
for i = 1, 60 do s:insert{i, {(i * 37) % 61}, {(i * 7) % 13, (i * 11) % 17}} end
print('one nb', ids(s.index.one:select({{30}}, {iterator = 'NEIGHBOR', limit = 7})))
print('one key', pcall(function() return s.index.one:select({30}, {iterator = 'NEIGHBOR'}) end))
print('one le', ids(s.index.one:select({10, 20}, {iterator = 'LE'})))
print('one all', ids(s.index.one:select()))
print('m nb', ids(s.index.m:select({6.5, 8.5}, {iterator = 'NEIGHBOR', limit = 9})))
print('m eq', ids(s.index.m:select({7.0000001, 11}, {iterator = 'EQ'})))
print('m eq2', ids(s.index.m:select({7.00001, 11}, {iterator = 'EQ'})))
s:truncate()
print('trunc', #s.index.m:select(), #s.index.one:select({{1}}, {iterator = 'NEIGHBOR'}))
s:insert{1, {1}, {1, 1}}
print('again', ids(s.index.m:select({0, 0}, {iterator = 'NEIGHBOR'})))
s:insert{2, {2}, {7, 11}} s:insert{3, {3}, {20, 20}}
print('eq exact', #s.index.m:select({7.0000001, 11}, {iterator = 'EQ'}),
      #s.index.m:select({7, 11}, {iterator = 'EQ'}), #s.index.m:select({7.0000000001, 11}, {iterator = 'EQ'}))
os.exit(0)
"""


def test_rtree_options_as_2_6_0(tmp_path):
    real, ours = both(RTREE_OPTIONS, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(real.stdout.splitlines()) == 21
    assert ours.stdout.splitlines() == real.stdout.splitlines()


# pairs() over BITSET and RTREE while the loop changes the space: 2.6.0's bitset
# iterator goes on past the tuple it handed out (deleted or not), its R-tree iterator
# ends at the first change
PAIRS_AND_CHANGES = """
box.cfg{log_level = 1}
local s = box.schema.space.create('s')
s:create_index('pk')
s:create_index('b', {type = 'bitset', parts = {2, 'unsigned'}, unique = false})
s:create_index('r', {type = 'rtree', parts = {3, 'array'}, unique = false})
for i = 1, 100 do s:insert{i, i % 4, {i % 10 + i / 1000, math.floor(i / 10) + i / 7000}} end
local function run(label, idx, key, it, change)
    local out = {}
    for _, t in idx:pairs(key, {iterator = it}) do
        table.insert(out, t[1])
        change(t, #out)
    end
    print(label, #out, table.concat(out, ' '))
end
run('b del each', s.index.b, 1, 'BITS_ALL_SET', function(t) s:delete{t[1]} end)
run('b repl', s.index.b, 2, 'BITS_ALL_SET', function(t, n) if n == 2 then s:replace{t[1], 2, {1, 1}} end end)
run('b upd', s.index.b, 0, 'BITS_ALL_NOT_SET', function(t, n) if n == 4 then s:replace{t[1], 1, {1, 1}} end end)
run('r del', s.index.r, {0, 0, 5, 5}, 'LE', function(t) s:delete{t[1]} end)
run('r none', s.index.r, {0, 0, 9, 9}, 'LE', function() end)
run('r ins', s.index.r, {0, 0, 9, 9}, 'LE', function(t, n) if n == 40 then s.index.b:select(2) s:insert{400, 3, {50, 50}} end end)
run('r nb', s.index.r, {3.3, 3.1}, 'NEIGHBOR', function(t, n) if n == 35 then s:replace{t[1], 2, {7, 7}} end end)
run('r all', s.index.r, {}, 'ALL', function() end)
os.exit(0)
"""


def test_pairs_while_changing_as_2_6_0(tmp_path):
    real, ours = both(PAIRS_AND_CHANGES, tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert len(_lines(real)) == 8
    assert _lines(ours) == _lines(real)
