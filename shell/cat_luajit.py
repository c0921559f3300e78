"""Lua values as Tarantool 2.6.0's LuaJIT holds them, for `spindle cat`.

`tarantoolctl cat` turns each row into Lua tables and hands them to yaml.encode,
json.encode or its own Lua writer, all of which walk maps with lua_next(). The
order of keys in its output is therefore the order of LuaJIT's hash nodes,
which depends on the string hashes, the table's size history and how
collisions were resolved. To print the same bytes this module replays what
LuaJIT does (third_party/luajit at the 2.6.0 tag, lj_tab.c and lua_hash() of
lj_api.c): `LuaTable` keeps an array part and a node array and inserts keys
with the same main-position / free-node / rehash rules, so iterating it gives
lua_next()'s order.

Value model (Lua type -> Python):
  nil -> None, boolean -> bool, number -> float (always a double, as LuaJIT
  without DUALNUM), string -> bytes, table -> LuaTable, cdata -> the classes
  below (U64, I64, NULL, DecimalValue, UuidValue, BoxTuple).

Also here: the two MsgPack decoders whose table-building differs (the C
luamp_decode presizes tables, msgpackffi grows them), LuaJIT's tostring() for
numbers, and its string-to-number check (lua_isnumber) used by the YAML encoder
to decide quoting.
"""
from __future__ import annotations

import math
import struct
import uuid as uuid_module
from typing import Any

_M32 = 0xFFFFFFFF
_INT_MIN = -(1 << 31)
LJ_MAX_ABITS = 28
LJ_MAX_ASIZE = (1 << (LJ_MAX_ABITS - 1)) + 1
# luaL_pushuint64/luaL_pushint64 and msgpackffi: integers beyond this become cdata.
DBL_INT_MAX = 1e14 - 1


class LuaError(Exception):
    """What would be a Lua error inside tarantoolctl."""


# ---------------------------------------------------------------------------
# cdata values.

class U64(int):
    """cdata<uint64_t>."""


class I64(int):
    """cdata<int64_t>."""


class _NullType:
    """msgpack.NULL / box.NULL: cdata<void *> NULL."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL"


NULL = _NullType()


class DecimalValue:
    """cdata<decimal_t>; `text` is decimal_to_string()."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


class UuidValue:
    """cdata<struct tt_uuid>; `text` is tt_uuid_str()."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


class BoxTuple:
    """cdata<struct tuple &>: a tuple made of raw MsgPack (an array)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def totable(self) -> LuaTable:
        """tuple_totable(): fields decoded by msgpackffi, table.insert'ed, array_mt."""
        return MsgpackFFI(self.data).decode_value()

    def fields(self) -> list[Any]:
        """What pairs(tuple) yields (tuple_ipairs): each field via msgpackffi."""
        return MsgpackFFI(self.data).array_items()


# ---------------------------------------------------------------------------
# Hashing.

def _rol(x: int, n: int) -> int:
    x &= _M32
    return ((x << n) | (x >> (32 - n))) & _M32


def _getu32(s: bytes, pos: int) -> int:
    return s[pos] | (s[pos + 1] << 8) | (s[pos + 2] << 16) | (s[pos + 3] << 24)


def _schar(b: int) -> int:
    """A `char` read from a `const char *` (signed on x86) widened to uint32."""
    return (b - 256) & _M32 if b >= 0x80 else b


def lua_hash(s: bytes) -> int:
    """lua_hash() of Tarantool's LuaJIT: the hash every interned string carries."""
    n = len(s)
    h = n
    if n >= 4:
        a = _getu32(s, 0)
        h ^= _getu32(s, n - 4)
        b = _getu32(s, (n >> 1) - 2)
        h ^= b
        h = (h - _rol(b, 14)) & _M32
        b = (b + _getu32(s, (n >> 2) - 1)) & _M32
    elif n > 0:
        a = _schar(s[0])
        h ^= _schar(s[n - 1])
        b = _schar(s[n >> 1])
        h ^= b
        h = (h - _rol(b, 14)) & _M32
    else:
        return 0
    a ^= h
    a = (a - _rol(h, 11)) & _M32
    b ^= a
    b = (b - _rol(a, 25)) & _M32
    h ^= b
    h = (h - _rol(b, 16)) & _M32
    return h


_HASH_CACHE: dict[bytes, int] = {}


def _str_hash(s: bytes) -> int:
    h = _HASH_CACHE.get(s)
    if h is None:
        if len(_HASH_CACHE) > 100000:
            _HASH_CACHE.clear()
        h = _HASH_CACHE[s] = lua_hash(s)
    return h


def _hashrot(lo: int, hi: int) -> int:
    # x86/x64 variant of hashrot() in lj_tab.h
    lo ^= hi
    hi = _rol(hi, 14)
    lo = (lo - hi) & _M32
    hi = _rol(hi, 5)
    hi ^= lo
    hi = (hi - _rol(lo, 13)) & _M32
    return hi


_pack_double = struct.Struct("<d").pack
_unpack_u32x2 = struct.Struct("<II").unpack


def _num_hash(n: float) -> int:
    lo, hi = _unpack_u32x2(_pack_double(n))
    return _hashrot(lo, (hi << 1) & _M32)


_HASH_BIAS = (-0x04C11DB7) & _M32
_fake_addresses: dict[int, int] = {}


def _gc_hash(obj: Any) -> int:
    # GC objects hash by address: not reproducible in Tarantool either. Give
    # each object a stable pseudo address so behaviour is at least consistent.
    addr = _fake_addresses.get(id(obj))
    if addr is None:
        addr = _fake_addresses[id(obj)] = (0x40000000 + 0x40 * len(_fake_addresses)) & _M32
    return _hashrot(addr, (addr + _HASH_BIAS) & _M32)


def _num2int(n: float) -> int:
    """lj_num2int(): (int32_t) cast, which is cvttsd2si on x86 (INT_MIN when out of range)."""
    if n != n or n >= 2147483648.0 or n <= -2147483649.0:
        return _INT_MIN
    return int(n)


def _fls(x: int) -> int:
    return x.bit_length() - 1


def hsize2hbits(s: int) -> int:
    if s == 0:
        return 0
    if s == 1:
        return 1
    return 1 + _fls(s - 1)


def _is_str(key: Any) -> bool:
    return type(key) is bytes


def _keys_equal(a: Any, b: Any) -> bool:
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is bytes or ta is float or ta is bool:
        return a == b
    return a is b


# ---------------------------------------------------------------------------
# Tables.

class _Node:
    __slots__ = ("key", "val", "next")

    def __init__(self):
        self.key = None
        self.val = None
        self.next = -1


class GCTab:
    """A LuaJIT GCtab: array part + hash part with LuaJIT's insertion rules.

    This is the simulation itself; `LuaTable` below uses it to find the
    iteration order of the keys it was given.
    """

    __slots__ = ("array", "nodes", "hmask", "freetop", "serialize")

    def __init__(self, asize: int = 0, hbits: int = 0, serialize: str | None = None):
        """lj_tab_new(): `asize` slots 0..asize-1, 2^hbits nodes (none if 0)."""
        self.array: list[Any] = [None] * asize
        self.serialize = serialize
        self._new_hpart(hbits)

    def _new_hpart(self, hbits: int) -> None:
        if hbits:
            size = 1 << hbits
            self.nodes = [_Node() for _ in range(size)]
            self.hmask = size - 1
            self.freetop = size
        else:
            self.nodes = [_Node()]     # the global nilnode
            self.hmask = 0
            self.freetop = 0

    # -- hashing ---------------------------------------------------------------

    def _hashkey(self, key: Any) -> int:
        tk = type(key)
        if tk is bytes:
            return _str_hash(key) & self.hmask
        if tk is float:
            return _num_hash(key) & self.hmask
        if tk is bool:
            return int(key) & self.hmask
        return _gc_hash(key) & self.hmask

    # -- lookup ----------------------------------------------------------------

    def get(self, key: Any) -> Any:
        """rawget (lj_tab_get)."""
        if key is None:
            return None
        if type(key) is float:
            k = _num2int(key)
            if key == k:
                if 0 <= k < len(self.array):
                    return self.array[k]
                key = float(k)
        nodes = self.nodes
        i = self._hashkey(key)
        while i >= 0:
            node = nodes[i]
            if _keys_equal(node.key, key):
                return node.val
            i = node.next
        return None

    def geti(self, i: int) -> Any:
        return self.get(float(i))

    # -- insertion -------------------------------------------------------------

    def set(self, key: Any, value: Any) -> None:
        """rawset / lua_settable on a table without __newindex (lj_tab_set)."""
        container, index = self._slot(key)
        if container is None:
            self.array[index] = value
        else:
            container.val = value

    def seti(self, i: int, value: Any) -> None:
        """lua_rawseti."""
        container, index = self._setint(i)
        if container is None:
            self.array[index] = value
        else:
            container.val = value

    def insert(self, value: Any) -> None:
        """table.insert(t, value)."""
        self.seti(self.length() + 1, value)

    def _slot(self, key: Any) -> tuple[_Node | None, int]:
        tk = type(key)
        if tk is bytes:
            return self._find_or_new(key)
        if tk is float:
            k = _num2int(key)
            if key == k:
                return self._setint(k)
            if key != key:
                raise LuaError("table index is NaN")
            return self._find_or_new(key)
        if key is None:
            raise LuaError("table index is nil")
        return self._find_or_new(key)

    def _setint(self, k: int) -> tuple[_Node | None, int]:
        if 0 <= k < len(self.array):
            return None, k
        return self._find_or_new(float(k))

    def _find_or_new(self, key: Any) -> tuple[_Node | None, int]:
        nodes = self.nodes
        i = self._hashkey(key)
        while i >= 0:
            node = nodes[i]
            if _keys_equal(node.key, key):
                return node, i
            i = node.next
        return self._newkey(key)

    def _newkey(self, key: Any) -> tuple[_Node | None, int]:
        """lj_tab_newkey(): Brent's variation, free nodes taken from the top."""
        nodes = self.nodes
        n = self._hashkey(key)
        if nodes[n].val is not None or self.hmask == 0:
            freenode = self.freetop
            while True:
                if freenode == 0:
                    self._rehash(key)
                    return self._slot(key)
                freenode -= 1
                if nodes[freenode].key is None:
                    break
            self.freetop = freenode
            main = nodes[n]
            collide = self._hashkey(main.key)
            if collide != n:
                # The colliding node is not in its main position: move it out.
                while nodes[collide].next != n:
                    collide = nodes[collide].next
                nodes[collide].next = freenode
                free = nodes[freenode]
                free.val, free.key, free.next = main.val, main.key, main.next
                main.next = -1
                main.val = None
                self._rechain(n, freenode, _is_str(main.key))
            else:
                free = nodes[freenode]
                free.next = main.next
                main.next = freenode
                n = freenode
        node = nodes[n]
        if type(key) is float and key == 0.0:
            key = 0.0          # -0 is stored as +0
        node.key = key
        return node, n

    def _rechain(self, n: int, freenode: int, n_key_is_str: bool) -> None:
        """Nodes after the moved one that have `n` as main position go back onto n."""
        nodes = self.nodes
        fn = freenode
        while True:
            nn = nodes[fn].next
            if nn < 0:
                return
            cand = nodes[nn]
            if n_key_is_str:
                hit = cand.val is not None and self._hashkey(cand.key) == n
            else:
                hit = (_is_str(cand.key) and cand.val is not None
                       and self._hashkey(cand.key) == n)
            if hit:
                nodes[fn].next = cand.next
                cand.next = nodes[n].next
                nodes[n].next = nn
                while True:
                    nn = nodes[fn].next
                    if nn < 0:
                        break
                    cand = nodes[nn]
                    if cand.val is not None:
                        mn = self._hashkey(cand.key)
                        if mn != fn and mn != nn:
                            nodes[fn].next = cand.next
                            cand.next = nodes[mn].next
                            nodes[mn].next = nn
                        else:
                            fn = nn
                    else:
                        fn = nn
                return
            fn = nn

    # -- resizing ---------------------------------------------------------------

    @staticmethod
    def _countint(key: Any, bins: list[int]) -> int:
        if type(key) is float:
            k = _num2int(key)
            if (k & _M32) < LJ_MAX_ASIZE and key == k:
                bins[_fls(k - 1) if k > 2 else 0] += 1
                return 1
        return 0

    def _countarray(self, bins: list[int]) -> int:
        asize = len(self.array)
        if asize == 0:
            return 0
        na = i = 0
        for b in range(LJ_MAX_ABITS):
            top = 2 << b
            if top >= asize:
                top = asize - 1
                if i > top:
                    break
            n = 0
            while i <= top:
                if self.array[i] is not None:
                    n += 1
                i += 1
            bins[b] += n
            na += n
        return na

    def _counthash(self, bins: list[int]) -> tuple[int, int]:
        total = na = 0
        for node in self.nodes[:self.hmask + 1]:
            if node.val is not None:
                na += self._countint(node.key, bins)
                total += 1
        return total, na

    @staticmethod
    def _bestasize(bins: list[int], nn: int) -> tuple[int, int]:
        b = total = na = sz = 0
        while 2 * nn > (1 << b) and total != nn:
            if bins[b] > 0:
                total += bins[b]
                if 2 * total > (1 << b):
                    sz = (2 << b) + 1
                    na = total
            b += 1
        return na, sz

    def _rehash(self, ek: Any) -> None:
        bins = [0] * LJ_MAX_ABITS
        asize = self._countarray(bins)
        total = 1 + asize
        hcount, hna = self._counthash(bins)
        total += hcount
        asize += hna
        asize += self._countint(ek, bins)
        na, asize = self._bestasize(bins, asize)
        total -= na
        self._resize(asize, hsize2hbits(total))

    def _resize(self, asize: int, hbits: int) -> None:
        oldarray = self.array
        oldasize = len(oldarray)
        oldnodes = self.nodes
        oldhmask = self.hmask
        if asize > oldasize:
            self.array = oldarray + [None] * (asize - oldasize)
        self._new_hpart(hbits)
        if asize < oldasize:
            self.array = oldarray[:asize]
            for i in range(asize, oldasize):
                if oldarray[i] is not None:
                    node, _ = self._find_or_new(float(i))
                    node.val = oldarray[i]
        if oldhmask > 0:
            for node in oldnodes:
                if node.val is not None:
                    self.set(node.key, node.val)

    # -- traversal ----------------------------------------------------------------

    def items(self) -> list[tuple[Any, Any]]:
        """(key, value) pairs in lua_next() order: array part, then the nodes."""
        out = [(float(i), v) for i, v in enumerate(self.array) if v is not None]
        out.extend((node.key, node.val) for node in self.nodes[:self.hmask + 1]
                   if node.val is not None)
        return out

    def length(self) -> int:
        """The # operator (lj_tab_len)."""
        array = self.array
        j = len(array)
        if j > 1 and array[j - 1] is None:
            i = 1
            while j - i > 1:
                m = (i + j) // 2
                if array[m - 1] is None:
                    j = m
                else:
                    i = m
            return i - 1
        if j:
            j -= 1
        if self.hmask <= 0:
            return j
        # unbound_search
        i = j
        j += 1
        while self.geti(j) is not None:
            i = j
            j *= 2
            if j > 2147483645:
                i = 1
                while self.geti(i) is not None:
                    i += 1
                return i - 1
        while j - i > 1:
            m = (i + j) // 2
            if self.geti(m) is None:
                j = m
            else:
                i = m
        return i

    def __repr__(self) -> str:
        return f"GCTab({self.items()!r})"


class _GcKey:
    """A GC object (cdata) used as a table key: equal by identity only."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _GcKey) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


_TRUE_KEY = ("bool", True)
_FALSE_KEY = ("bool", False)


def _dict_key(key: Any) -> Any:
    """A Python dict key that is equal exactly when the Lua keys are (1.0 and
    true, or 5.0 and 5ULL, are different keys in Lua)."""
    tk = type(key)
    if tk is bytes or tk is float:
        return key
    if tk is bool:
        return _TRUE_KEY if key else _FALSE_KEY
    return _GcKey(key)


_LAYOUT_CACHE: dict[tuple, list[int]] = {}


def _layout(asize: int, hbits: int, dict_keys: tuple, keys: tuple) -> list[int]:
    """Iteration order of a table created with (asize, hbits) into which
    `keys` (distinct, with non-nil values) were inserted in this order, as
    indexes into `keys`. Only the sequence of distinct keys shapes a table, so
    the simulation runs once per shape (`dict_keys`, the keys as `_dict_key`
    makes them, tell 1.0 from true). Tables keyed by cdata are not cached:
    those hash by address."""
    cacheable = not any(type(k) is _GcKey for k in dict_keys)
    cache_key = (asize, hbits, dict_keys)
    order = _LAYOUT_CACHE.get(cache_key) if cacheable else None
    if order is None:
        sim = GCTab(asize, hbits)
        for i, key in enumerate(keys):
            sim.set(key, i)
        order = [value for _, value in sim.items()]
        if cacheable:
            if len(_LAYOUT_CACHE) > 20000:
                _LAYOUT_CACHE.clear()
            _LAYOUT_CACHE[cache_key] = order
    return order


class LuaTable:
    """A Lua table as tarantoolctl builds it: values by key, plus the exact
    lua_next() order, which `GCTab` works out from the creation sizes and
    the order the keys were inserted in.

    `serialize` is the metatable's __serialize hint ('seq', 'map', ...) or None.
    """

    __slots__ = ("asize", "hbits", "entries", "serialize", "_order", "_seq")

    def __init__(self, asize: int = 0, hbits: int = 0, serialize: str | None = None):
        """lj_tab_new(): `asize` slots 0..asize-1, 2^hbits nodes (none if 0)."""
        self.asize = asize
        self.hbits = hbits
        self.entries: dict[Any, list] = {}     # dict key -> [lua key, value]
        self.serialize = serialize
        self._order: list[tuple[Any, Any]] | None = None
        self._seq = 0          # n while the keys are exactly 1..n, else -1

    @classmethod
    def create(cls, narr: int = 0, nrec: int = 0) -> LuaTable:
        """lua_createtable(L, narr, nrec)."""
        return cls(narr + 1 if narr > 0 else 0, hsize2hbits(nrec))

    def get(self, key: Any) -> Any:
        """rawget."""
        if key is None:
            return None
        entry = self.entries.get(_dict_key(key))
        return None if entry is None else entry[1]

    def geti(self, i: int) -> Any:
        entry = self.entries.get(float(i))
        return None if entry is None else entry[1]

    def set(self, key: Any, value: Any) -> None:
        """rawset / lua_settable without __newindex. Values are never nil here."""
        if type(key) is float:
            if key != key:
                raise LuaError("table index is NaN")
            if key == 0.0:
                key = 0.0
        elif key is None:
            raise LuaError("table index is nil")
        dkey = _dict_key(key)
        entry = self.entries.get(dkey)
        if entry is None:
            self.entries[dkey] = [key, value]
            if self._seq >= 0:
                self._seq = self._seq + 1 if key == self._seq + 1 and type(key) is float else -1
        else:
            entry[1] = value
        self._order = None

    def seti(self, i: int, value: Any) -> None:
        """lua_rawseti."""
        self.set(float(i), value)

    def insert(self, value: Any) -> None:
        """table.insert(t, value)."""
        self.seti(self.length() + 1, value)

    def length(self) -> int:
        """The # operator."""
        if self._seq >= 0:
            return self._seq     # keys exactly 1..n
        sim = GCTab(self.asize, self.hbits)
        for key, value in self.entries.values():
            sim.set(key, value)
        return sim.length()

    def items(self) -> list[tuple[Any, Any]]:
        """(key, value) pairs in lua_next() order."""
        order = self._order
        if order is None:
            entries = list(self.entries.values())
            layout = _layout(self.asize, self.hbits, tuple(self.entries),
                             tuple(entry[0] for entry in entries))
            order = self._order = [(entries[i][0], entries[i][1]) for i in layout]
        return order

    def keys(self) -> list[Any]:
        """The keys, in no particular order."""
        return [entry[0] for entry in self.entries.values()]

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"LuaTable({self.items()!r}, serialize={self.serialize!r})"


# ---------------------------------------------------------------------------
# MsgPack -> Lua values.

_unpack_be = {1: struct.Struct(">B").unpack_from, 2: struct.Struct(">H").unpack_from,
              4: struct.Struct(">I").unpack_from, 8: struct.Struct(">Q").unpack_from}
_unpack_sbe = {1: struct.Struct(">b").unpack_from, 2: struct.Struct(">h").unpack_from,
               4: struct.Struct(">i").unpack_from, 8: struct.Struct(">q").unpack_from}
_unpack_f32 = struct.Struct(">f").unpack_from
_unpack_f64 = struct.Struct(">d").unpack_from


class MsgpackError(ValueError):
    pass


def _ext_value(ext_type: int, payload: bytes, who: str) -> Any:
    if ext_type == 1:
        return DecimalValue(decode_decimal(payload))
    if ext_type == 2 and len(payload) == 16:
        return UuidValue(str(uuid_module.UUID(bytes=payload)))
    if who == "ffi":
        raise LuaError("unsupported extension type" if ext_type == 0
                       else "Unsupported extension type")
    raise LuaError(f"msgpack.decode: unsupported extension: {ext_type & 0xFF}")


def decode_decimal(payload: bytes) -> str:
    """MP_DECIMAL: a MsgPack int scale, then packed BCD with a sign nibble.

    Printed like decimal_to_string() of 2.6.0, whose decNumber prints plain
    notation only: 1E+10 -> '10000000000', 1E-10 -> '0.0000000001', 0E+5 ->
    '000000'.
    """
    b = payload[0]
    if b <= 0x7F:
        scale, pos = b, 1
    elif b >= 0xE0:
        scale, pos = b - 256, 1
    elif b in (0xCC, 0xCD, 0xCE, 0xCF):
        size = 1 << (b - 0xCC)
        scale, pos = _unpack_be[size](payload, 1)[0], 1 + size
    elif b in (0xD0, 0xD1, 0xD2, 0xD3):
        size = 1 << (b - 0xD0)
        scale, pos = _unpack_sbe[size](payload, 1)[0], 1 + size
    else:
        raise LuaError("msgpack.decode: invalid MsgPack")
    nibbles = []
    for byte in payload[pos:]:
        nibbles.extend((byte >> 4, byte & 0x0F))
    if not nibbles or any(d > 9 for d in nibbles[:-1]):
        raise LuaError("msgpack.decode: invalid MsgPack")
    sign = nibbles.pop()
    digits = "".join(map(str, nibbles)).lstrip("0") or "0"
    if scale <= 0:
        text = digits + "0" * (-scale)
    elif len(digits) > scale:
        text = digits[:-scale] + "." + digits[-scale:]
    else:
        text = "0." + "0" * (scale - len(digits)) + digits
    return ("-" if sign in (0x0B, 0x0D) else "") + text


class _Decoder:
    """Common MsgPack walking; subclasses build tables their own way."""

    who = "c"

    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise MsgpackError("truncated MsgPack")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def _uint(self, size: int) -> int:
        if self.pos + size > len(self.data):
            raise MsgpackError("truncated MsgPack")
        value = _unpack_be[size](self.data, self.pos)[0]
        self.pos += size
        return value

    def _sint(self, size: int) -> int:
        if self.pos + size > len(self.data):
            raise MsgpackError("truncated MsgPack")
        value = _unpack_sbe[size](self.data, self.pos)[0]
        self.pos += size
        return value

    def decode_value(self) -> Any:
        if self.pos >= len(self.data):
            raise MsgpackError("truncated MsgPack")
        c = self.data[self.pos]
        self.pos += 1
        if c <= 0x7F:
            return float(c)
        if c >= 0xE0:
            return float(c - 256)
        if 0xA0 <= c <= 0xBF:
            return self._take(c & 0x1F)
        if 0x90 <= c <= 0x9F:
            return self.array(c & 0x0F)
        if 0x80 <= c <= 0x8F:
            return self.map(c & 0x0F)
        if c == 0xC0:
            return NULL
        if c == 0xC2:
            return False
        if c == 0xC3:
            return True
        if c in (0xC4, 0xD9):
            return self._take(self._uint(1))
        if c in (0xC5, 0xDA):
            return self._take(self._uint(2))
        if c in (0xC6, 0xDB):
            return self._take(self._uint(4))
        if c == 0xCA:
            return float(_unpack_f32(self._take(4))[0])
        if c == 0xCB:
            return float(_unpack_f64(self._take(8))[0])
        if 0xCC <= c <= 0xCF:
            return self.unsigned(self._uint(1 << (c - 0xCC)))
        if 0xD0 <= c <= 0xD3:
            return self.signed(self._sint(1 << (c - 0xD0)))
        if c == 0xDC:
            return self.array(self._uint(2))
        if c == 0xDD:
            return self.array(self._uint(4))
        if c == 0xDE:
            return self.map(self._uint(2))
        if c == 0xDF:
            return self.map(self._uint(4))
        if 0xD4 <= c <= 0xD8:
            size = 1 << (c - 0xD4)
            ext_type = self._sint(1)
            return _ext_value(ext_type, self._take(size), self.who)
        if 0xC7 <= c <= 0xC9:
            size = self._uint(1 << (c - 0xC7))
            ext_type = self._sint(1)
            return _ext_value(ext_type, self._take(size), self.who)
        raise MsgpackError(f"invalid MsgPack byte 0x{c:02x}")

    @staticmethod
    def unsigned(value: int) -> Any:
        return float(value) if value <= DBL_INT_MAX else U64(value)

    @staticmethod
    def signed(value: int) -> Any:
        return float(value) if -DBL_INT_MAX <= value <= DBL_INT_MAX else I64(value)

    def array(self, size: int) -> LuaTable:
        raise NotImplementedError

    def map(self, size: int) -> LuaTable:
        raise NotImplementedError


class LuampDecoder(_Decoder):
    """luamp_decode() with luaL_msgpack_default: presized tables, seq/map hints."""

    def array(self, size: int) -> LuaTable:
        table = LuaTable.create(size, 0)
        for i in range(size):
            table.seti(i + 1, self.decode_value())
        table.serialize = "seq"
        return table

    def map(self, size: int) -> LuaTable:
        table = LuaTable.create(0, size)
        for _ in range(size):
            key = self.decode_value()
            value = self.decode_value()
            table.set(key, value)
        table.serialize = "map"
        return table


class MsgpackFFI(_Decoder):
    """msgpackffi.decode_unchecked(): `{}` grown by table.insert / t[k] = v."""

    who = "ffi"

    def array(self, size: int) -> LuaTable:
        table = LuaTable()
        for _ in range(size):
            table.insert(self.decode_value())
        table.serialize = "seq"
        return table

    def map(self, size: int) -> LuaTable:
        table = LuaTable()
        for _ in range(size):
            key = self.decode_value()
            value = self.decode_value()
            table.set(key, value)
        table.serialize = "map"
        return table

    def array_items(self) -> list[Any]:
        """The fields of a MsgPack array, each decoded on its own."""
        c = self.data[self.pos]
        self.pos += 1
        if 0x90 <= c <= 0x9F:
            size = c & 0x0F
        elif c == 0xDC:
            size = self._uint(2)
        elif c == 0xDD:
            size = self._uint(4)
        else:
            raise MsgpackError("a tuple must be an array")
        return [self.decode_value() for _ in range(size)]


# ---------------------------------------------------------------------------
# Numbers and strings the way LuaJIT / Tarantool print and parse them.

def fmt_g14(x: float) -> str:
    """snprintf("%.14g") as glibc prints it (fpconv_g_fmt, LuaJIT tostring)."""
    if x != x:
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return "%.14g" % x


def lua_tostring(value: Any) -> str:
    """tostring() of a scalar Lua value."""
    if value is None:
        return "nil"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is float:
        if value != value:
            return "nan"
        return fmt_g14(value)
    if isinstance(value, U64):
        return f"{int(value)}ULL"
    if isinstance(value, I64):
        return f"{int(value)}LL"
    if value is NULL:
        return "cdata<void *>: NULL"
    if isinstance(value, (DecimalValue, UuidValue)):
        return value.text
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return "table: 0x00000000" if isinstance(value, LuaTable) else repr(value)


_SPACE = b" \t\n\v\f\r"
_DIGITS = b"0123456789"
_XDIGITS = b"0123456789abcdefABCDEF"


_ISNUMBER_CACHE: dict[bytes, bool] = {}
# A string starting with one of these can only be a number if it is inf/nan.
_NOT_NUMBER_START = frozenset(c for c in range(0x41, 0x100) if c not in b"iInN")


def lua_isnumber(s: bytes) -> bool:
    """lua_isnumber() on a string: lj_strscan_scan(..., STRSCAN_OPT_TONUM) succeeds."""
    if s and s[0] in _NOT_NUMBER_START:
        return False
    result = _ISNUMBER_CACHE.get(s)
    if result is None:
        if len(_ISNUMBER_CACHE) > 50000:
            _ISNUMBER_CACHE.clear()
        result = _ISNUMBER_CACHE[s] = _strscan_ok(s)
    return result


def _strscan_ok(s: bytes) -> bool:
    pe = len(s)
    p = 0

    def at(i: int) -> int:       # the string is NUL-terminated in LuaJIT
        return s[i] if i < pe else 0

    def casecmp(c: int, ch: str) -> bool:
        return (c | 0x20) == ord(ch)

    if not (48 <= at(p) <= 57):
        while at(p) and at(p) in _SPACE:
            p += 1
        if at(p) in (0x2B, 0x2D):
            p += 1
        if at(p) >= ord("A"):
            if casecmp(at(p), "i") and casecmp(at(p + 1), "n") and casecmp(at(p + 2), "f"):
                p += 3
                if (casecmp(at(p), "i") and casecmp(at(p + 1), "n") and casecmp(at(p + 2), "i")
                        and casecmp(at(p + 3), "t") and casecmp(at(p + 4), "y")):
                    p += 5
            elif casecmp(at(p), "n") and casecmp(at(p + 1), "a") and casecmp(at(p + 2), "n"):
                p += 3
            while at(p) and at(p) in _SPACE:
                p += 1
            return not (at(p) or p < pe)
    base = 10
    digits = _DIGITS
    dp = False
    hasdig = dig = 0
    if at(p) <= ord("0"):
        if at(p) == ord("0"):
            if casecmp(at(p + 1), "x"):
                base, digits, p = 16, _XDIGITS, p + 2
            elif casecmp(at(p + 1), "b"):
                base, p = 2, p + 2
        while True:
            c = at(p)
            if c == ord("0"):
                hasdig = 1
            elif c == ord("."):
                if dp:
                    return False
                dp = True
            else:
                break
            p += 1
    bad_binary = False
    while True:
        c = at(p)
        if c and c in digits:
            if base == 2 and c not in b"01":
                bad_binary = True
            dig += 1
        elif c == ord("."):
            if dp:
                return False
            dp = True
            if base == 2:
                bad_binary = True
        else:
            break
        p += 1
    if not (hasdig | dig):
        return False
    is_int = not dp
    if base >= 10 and casecmp(at(p), "p" if base == 16 else "e"):
        is_int = False
        p += 1
        if at(p) in (0x2B, 0x2D):
            p += 1
        if not (48 <= at(p) <= 57):
            return False
        while 48 <= at(p) <= 57:
            p += 1
    if at(p):
        c = at(p)
        if casecmp(c, "i"):
            return False
        if is_int and (casecmp(c, "u") or casecmp(c, "l")):
            return False
        while at(p) and at(p) in _SPACE:
            p += 1
        if at(p):
            return False
    if p < pe:
        return False
    if base == 2 and (bad_binary or dig > 64):
        return False
    return True
