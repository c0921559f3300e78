"""The compiled row walker: a block payload -> one NumPy array per row field.

scan.iter_rows walks rows with a C MsgPack unpacker but still makes Python
objects for every header; at ~3 µs a row that is six times a bare unpack loop,
and two cores through Spark could not beat one such loop. This walker does the
same walk in machine code (numba, compiled once per process and cached on
disk): it reads the header fields and the DML body keys the columns need and
records every other value as a byte span, creating no objects per row.

It accepts exactly the rows Tarantool writes: header and DML body keys that
are integers, header values that are integers (the timestamp: a float or an
integer), integer body ids in the range of their columns. For anything else
(a string key, a huge LSN, a cut value) it reports UNSUPPORTED and the caller
walks that payload with the Python walker, which gives the general answer or
the precise error: the two agree wherever both accept (tests/spark).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from spindle.core.iproto.constants import IprotoKey

OK, UNSUPPORTED, FULL = 0, 1, 2

_NOP, _UPDATE = 12, 4
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_EXACT_FLOAT_INT = 1 << 53        # larger integers do not survive a float64
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_U64_HALF = np.uint64(1 << 63)
# the header keys the walker reads (core/iproto/xrow.py: HEADER_LAYOUT); numba takes
# them as constants when it compiles
_K_TYPE, _K_REPLICA_ID, _K_LSN, _K_TIMESTAMP, _K_GROUP_ID, _K_TSN, _K_FLAGS = (
    int(key) for key in (IprotoKey.REQUEST_TYPE, IprotoKey.REPLICA_ID, IprotoKey.LSN,
                         IprotoKey.TIMESTAMP, IprotoKey.GROUP_ID, IprotoKey.TSN, IprotoKey.FLAGS))


@njit(cache=True, nogil=True, inline='always')
def _be(buf, pos, n):
    """Big-endian unsigned integer of n bytes at pos (n is 1, 2, 4 or 8),
    written out per size so the compiler has no loop to keep."""
    if n == 1:
        return np.uint64(buf[pos])
    if n == 2:
        return (np.uint64(buf[pos]) << np.uint64(8)) | np.uint64(buf[pos + 1])
    hi = ((np.uint64(buf[pos]) << np.uint64(24)) | (np.uint64(buf[pos + 1]) << np.uint64(16))
          | (np.uint64(buf[pos + 2]) << np.uint64(8)) | np.uint64(buf[pos + 3]))
    if n == 4:
        return hi
    lo = ((np.uint64(buf[pos + 4]) << np.uint64(24)) | (np.uint64(buf[pos + 5]) << np.uint64(16))
          | (np.uint64(buf[pos + 6]) << np.uint64(8)) | np.uint64(buf[pos + 7]))
    return (hi << np.uint64(32)) | lo


@njit(cache=True, nogil=True)
def _skip(buf, pos, end):
    """Position after the MsgPack value at pos, or -1 if it is cut or invalid.
    Iterative: `pending` counts the values still to pass (containers add
    their elements), so nesting depth costs nothing."""
    pending = 1
    while pending > 0:
        if pos >= end:
            return -1
        b = buf[pos]
        pos += 1
        pending -= 1
        if b <= 0x7f or b >= 0xe0:
            continue
        if b <= 0x8f:
            pending += 2 * (b & 0x0f)
        elif b <= 0x9f:
            pending += b & 0x0f
        elif b <= 0xbf:
            pos += b & 0x1f
        elif b == 0xc0 or b == 0xc2 or b == 0xc3:
            continue
        elif b == 0xc1:
            return -1
        elif b == 0xc4 or b == 0xd9 or b == 0xc7:       # 1-byte length
            if pos + 1 > end:
                return -1
            pos += 1 + np.int64(buf[pos]) + (1 if b == 0xc7 else 0)
        elif b == 0xc5 or b == 0xda or b == 0xc8:       # 2-byte length
            if pos + 2 > end:
                return -1
            pos += 2 + np.int64(_be(buf, pos, 2)) + (1 if b == 0xc8 else 0)
        elif b == 0xc6 or b == 0xdb or b == 0xc9:       # 4-byte length
            if pos + 4 > end:
                return -1
            pos += 4 + np.int64(_be(buf, pos, 4)) + (1 if b == 0xc9 else 0)
        elif b == 0xca or b == 0xce or b == 0xd2:
            pos += 4
        elif b == 0xcb or b == 0xcf or b == 0xd3:
            pos += 8
        elif b == 0xcc or b == 0xd0:
            pos += 1
        elif b == 0xcd or b == 0xd1:
            pos += 2
        elif b >= 0xd4 and b <= 0xd8:                   # fixext 1..16
            pos += 1 + (1 << (b - 0xd4))
        elif b == 0xdc or b == 0xde:
            if pos + 2 > end:
                return -1
            n = np.int64(_be(buf, pos, 2))
            pending += 2 * n if b == 0xde else n
            pos += 2
        else:                                           # 0xdd, 0xdf
            if pos + 4 > end:
                return -1
            n = np.int64(_be(buf, pos, 4))
            pending += 2 * n if b == 0xdf else n
            pos += 4
    return pos if pos <= end else -1


@njit(cache=True, nogil=True, inline='always')
def _map_len(buf, pos, end):
    """(element count, position of the first key) of a map at pos; count -1
    when the value there is not a map or is cut."""
    if pos >= end:
        return -1, pos
    b = buf[pos]
    if 0x80 <= b <= 0x8f:
        return np.int64(b & 0x0f), pos + 1
    if b == 0xde and pos + 3 <= end:
        return np.int64(_be(buf, pos + 1, 2)), pos + 3
    if b == 0xdf and pos + 5 <= end:
        return np.int64(_be(buf, pos + 1, 4)), pos + 5
    return -1, pos


@njit(cache=True, nogil=True, inline='always')
def _int(buf, pos, end):
    """(kind, value, next position) of an integer at pos. kind 0: a signed
    64-bit value; 1: an unsigned value >= 2**63 (value holds its bits);
    -1: not an integer or cut."""
    if pos >= end:
        return -1, np.int64(0), pos
    b = buf[pos]
    if b <= 0x7f:
        return 0, np.int64(b), pos + 1
    if b >= 0xe0:
        return 0, np.int64(b) - 256, pos + 1
    if 0xcc <= b <= 0xcf:
        n = 1 << (b - 0xcc)
        if pos + 1 + n > end:
            return -1, np.int64(0), pos
        u = _be(buf, pos + 1, n)
        return (1 if u >= _U64_HALF else 0), np.int64(u), pos + 1 + n
    if 0xd0 <= b <= 0xd3:
        n = 1 << (b - 0xd0)
        if pos + 1 + n > end:
            return -1, np.int64(0), pos
        u = _be(buf, pos + 1, n)
        bits = 8 * n
        v = np.int64(u)
        if bits < 64 and v >= (np.int64(1) << (bits - 1)):
            v -= np.int64(1) << bits
        return 0, v, pos + 1 + n
    return -1, np.int64(0), pos


@njit(cache=True, nogil=True, inline='always')
def _number(buf, pos, end):
    """(ok, float value, next position) of a timestamp: a finite float or an
    integer that a float64 holds exactly."""
    if pos < end and (buf[pos] == 0xcb or buf[pos] == 0xca):
        if buf[pos] == 0xcb:
            if pos + 9 > end:
                return False, 0.0, pos
            value = np.uint64(_be(buf, pos + 1, 8)).view(np.float64)
            nxt = pos + 9
        else:
            if pos + 5 > end:
                return False, 0.0, pos
            value = np.float64(np.uint32(_be(buf, pos + 1, 4)).view(np.float32))
            nxt = pos + 5
        return math.isfinite(value), value, nxt
    kind, v, nxt = _int(buf, pos, end)
    if kind != 0 or v > _EXACT_FLOAT_INT or v < -_EXACT_FLOAT_INT:
        return False, 0.0, pos
    return True, np.float64(v), nxt


@njit(cache=True, nogil=True)
def walk(buf, bounds, ints, ts, commit):
    """Walk the rows of the blocks whose payloads lie at [bounds[b],
    bounds[b+1]) of `buf` (uint8): a row never runs past its block's end.
    Per row r it fills
        ints[r] = (row_pos, type, replica_id, group_id, lsn, tsn, space_id,
                   index_id, index_base, key_s, key_e, tup_s, tup_e, ops_s, ops_e)
    (space_id / index_id -1 when absent: only DML rows have them; spans -1
    when absent; positions are in buf), ts[r] (0.0 = no timestamp) and
    commit[r]. Returns (status, rows, block): OK with every row, or
    UNSUPPORTED / FULL (no room for another row) at `block` with the rows of
    the blocks before it."""
    r = 0
    for block in range(bounds.shape[0] - 1):
        status, after = _walk_block(buf, bounds[block], bounds[block + 1], ints, ts, commit, r)
        if status != OK:
            return status, r, block       # rows of the blocks before it only
        r = after
    return OK, r, bounds.shape[0] - 1


@njit(cache=True, nogil=True)
def _walk_block(buf, pos, end, ints, ts, commit, r):
    while pos < end:
        if r >= ints.shape[0]:
            return FULL, r
        row_pos = pos
        count, pos = _map_len(buf, pos, end)
        if count < 0:
            return UNSUPPORTED, r
        rtype = np.int64(0)
        replica_id = np.int64(0)
        group_id = np.int64(0)
        lsn = np.int64(0)
        diff = np.int64(0)
        has_diff = False
        flags = np.int64(0)
        timestamp = 0.0
        for _ in range(count):
            if pos < end and buf[pos] <= 0x7f:      # the usual key: a fixint
                kkind, key, pos = 0, np.int64(buf[pos]), pos + 1
            else:
                kkind, key, pos = _int(buf, pos, end)
            if kkind != 0 or key < 0:
                return UNSUPPORTED, r
            if key == _K_TIMESTAMP:
                ok, timestamp, pos = _number(buf, pos, end)
                if not ok:
                    return UNSUPPORTED, r
                continue
            if pos < end and buf[pos] <= 0x7f:
                vkind, value, nxt = 0, np.int64(buf[pos]), pos + 1
            else:
                vkind, value, nxt = _int(buf, pos, end)
            if vkind < 0:
                if (key == _K_TYPE or key == _K_REPLICA_ID or key == _K_LSN
                        or key == _K_GROUP_ID or key == _K_TSN or key == _K_FLAGS):
                    return UNSUPPORTED, r
                nxt = _skip(buf, pos, end)      # another key's value: not read
                if nxt < 0:
                    return UNSUPPORTED, r
            elif key == _K_TSN:
                diff = value     # >= 2**63 wraps to negative, as 2.6.0 means it (xrow.tsn_of)
                has_diff = True
            elif vkind == 1 and (key == _K_TYPE or key == _K_REPLICA_ID or key == _K_LSN
                                 or key == _K_GROUP_ID or key == _K_FLAGS):
                return UNSUPPORTED, r
            elif key == _K_TYPE:
                rtype = value
            elif key == _K_REPLICA_ID:
                replica_id = value
            elif key == _K_LSN:
                lsn = value
            elif key == _K_GROUP_ID:
                group_id = value
            elif key == _K_FLAGS:
                flags = value
            pos = nxt
        if not (_INT32_MIN <= replica_id <= _INT32_MAX and _INT32_MIN <= group_id <= _INT32_MAX):
            return UNSUPPORTED, r
        tsn = lsn
        is_commit = True
        if has_diff:
            if (diff > 0 and lsn < _INT64_MIN + diff) or (
                    diff < 0 and lsn > _INT64_MAX + diff):
                return UNSUPPORTED, r
            tsn = lsn - diff
            is_commit = (flags & 1) == 1
        space_id = np.int64(-1)
        index_id = np.int64(-1)
        index_base = np.int64(0)
        key_s = key_e = tup_s = tup_e = ops_s = ops_e = np.int64(-1)
        if rtype != _NOP and pos < end:
            if rtype == 2 or rtype == 3 or rtype == 4 or rtype == 5 or rtype == 9:
                index_id = 0
                bcount, pos = _map_len(buf, pos, end)
                if bcount < 0:
                    return UNSUPPORTED, r
                for _ in range(bcount):
                    if pos < end and buf[pos] <= 0x7f:
                        kkind, key, pos = 0, np.int64(buf[pos]), pos + 1
                    else:
                        kkind, key, pos = _int(buf, pos, end)
                    if kkind != 0:
                        return UNSUPPORTED, r
                    if key == 0x10 or key == 0x11 or key == 0x15:
                        vkind, value, pos = _int(buf, pos, end)
                        if vkind != 0:
                            return UNSUPPORTED, r
                        if key == 0x15:
                            index_base = value
                        elif value < 0 or value > _INT32_MAX:
                            return UNSUPPORTED, r
                        elif key == 0x10:
                            space_id = value
                        else:
                            index_id = value
                        continue
                    start = pos
                    pos = _skip(buf, pos, end)
                    if pos < 0:
                        return UNSUPPORTED, r
                    if key == 0x21:
                        tup_s, tup_e = start, pos
                    elif key == 0x20:
                        key_s, key_e = start, pos
                    elif key == 0x28:
                        ops_s, ops_e = start, pos
                if rtype == _UPDATE:      # 2.6.0 writes UPDATE operations under TUPLE
                    ops_s, ops_e, tup_s, tup_e = tup_s, tup_e, np.int64(-1), np.int64(-1)
            else:
                tup_s = pos
                pos = _skip(buf, pos, end)
                if pos < 0:
                    return UNSUPPORTED, r
                tup_e = pos
        ints[r, 0] = row_pos
        ints[r, 1] = rtype
        ints[r, 2] = replica_id
        ints[r, 3] = group_id
        ints[r, 4] = lsn
        ints[r, 5] = tsn
        ints[r, 6] = space_id
        ints[r, 7] = index_id
        ints[r, 8] = index_base
        ints[r, 9] = key_s
        ints[r, 10] = key_e
        ints[r, 11] = tup_s
        ints[r, 12] = tup_e
        ints[r, 13] = ops_s
        ints[r, 14] = ops_e
        ts[r] = timestamp
        commit[r] = is_commit
        r += 1
    return OK, r


@njit(cache=True, nogil=True)
def gather(buf, starts, ends):
    """The spans [starts[i], ends[i]) of buf, concatenated, with Arrow's int32
    offsets (an absent span, start -1, is empty; the caller marks it null)."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, dtype=np.int32)
    total = 0
    for i in range(n):
        offsets[i] = total
        if starts[i] >= 0:
            total += ends[i] - starts[i]
    offsets[n] = total
    values = np.empty(total, dtype=np.uint8)
    at = 0
    for i in range(n):
        s = starts[i]
        if s >= 0:
            length = ends[i] - s
            values[at:at + length] = buf[s:s + length]
            at += length
    return offsets, values


@njit(cache=True, nogil=True)
def gather_codes(blob, bounds, codes):
    """Arrow int32 offsets and bytes of a string column whose row i holds
    blob[bounds[c]:bounds[c + 1]] for c = codes[i] (a code -1 is empty; the
    caller marks it null). Names are short: bytes are copied one by one, as
    a slice per row costs more than the copy (measured)."""
    n = codes.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int32)
    for i in range(n):
        c = codes[i]
        offsets[i + 1] = offsets[i] + (bounds[c + 1] - bounds[c] if c >= 0 else 0)
    values = np.empty(offsets[n], dtype=np.uint8)
    for i in range(n):
        c = codes[i]
        if c >= 0:
            first, at = bounds[c], offsets[i]
            for j in range(bounds[c + 1] - first):
                values[at + j] = blob[first + j]
    return offsets, values


@njit(cache=True, nogil=True)
def factorize_small(values, limit):
    """(True, distinct values ascending, each value's int32 position among
    them) when every value is in [-1, limit); (False, empty, empty) when one
    is not. One table lookup per value: request types and space ids are small."""
    n = values.shape[0]
    high = -1
    for i in range(n):
        v = values[i]
        if v < -1 or v >= limit:
            return False, np.empty(0, np.int64), np.empty(0, np.int32)
        high = max(high, v)
    table = np.full(high + 2, -1, np.int32)       # value + 1 -> its position
    for i in range(n):
        table[values[i] + 1] = 0
    found = np.empty(high + 2, np.int64)
    k = 0
    for j in range(high + 2):
        if table[j] == 0:
            table[j] = k
            found[k] = j - 1
            k += 1
    inverse = np.empty(n, np.int32)
    for i in range(n):
        inverse[i] = table[values[i] + 1]
    return True, found[:k], inverse
