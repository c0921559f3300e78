#!/usr/bin/env python3
"""Index kinds (issue 23 item 4): Spindle and real Tarantool 2.6.0 side by side.

    .venv/bin/python scripts/bench/index_kinds.py [--rows N] [--reps K] [--only KIND,...]
        [--index-only]

From Lua, over a space of `--rows` tuples: lookups/s through a JSON-path TREE index
(EQ on a unique 'doc.name'), a multikey TREE index (EQ on one element), a
unicode_ci-collated TREE index (EQ, unique), a BITSET (BITS_ALL_SET of one bit, the
first 10 tuples), an RTREE (NEIGHBOR of a point, the 10 nearest; OVERLAPS of a small
box), and inserts/s into a space carrying all of those indexes (100 rows/txn).

Spindle's BITSET combines bitmaps of tuple ids (core/box/index_bitset.py) and its
RTREE walks an R-tree shaped as 2.6.0's (core/box/index_rtree.py), as 2.6.0 does.
Each figure is the median of `--reps` runs, the servers alternating, each run in a
fresh work dir with `wal_mode = 'write'`. Rates: higher is better; the ratio is
Spindle / Tarantool. `--only` runs the named kinds (path, multikey, collation, bitset,
rtree_neighbor, rtree_overlaps, insert). `--index-only` measures instead, in this
process, the BITSET and RTREE index objects alone on the same rows (no Lua, no
tuples made for Lua): what the index itself costs per search and per insert.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from bench_setup import SPINDLE, compile_bytecode, print_side_by_side, run_lua

SPINDLE = os.environ.get("SPINDLE_BIN", SPINDLE)

LUA = """
box.cfg{{wal_mode = 'write', log_level = 2}}
local clock = require('clock')
local n, kind = {rows}, '{kind}'
local s = box.schema.space.create('bench')
s:create_index('pk')
s:create_index('path', {{parts = {{{{2, 'string', path = 'name'}}}}}})
s:create_index('multi', {{parts = {{{{3, 'unsigned', path = '[*]'}}}}}})
s:create_index('coll', {{parts = {{{{4, 'string', collation = 'unicode_ci'}}}}}})
s:create_index('bits', {{type = 'bitset', parts = {{5, 'unsigned'}}}})
s:create_index('rt', {{type = 'rtree', parts = {{6, 'array'}}}})
local function row(i)
    return {{i, {{name = 'n' .. i}}, {{2 * i, 2 * i + 1}}, 'Word' .. i, i % 64,
             {{i % 1000, math.floor(i / 1000)}}}}
end
local t = clock.monotonic()
if kind == 'insert' then
    for i = 1, n, 100 do
        box.begin()
        for j = i, math.min(i + 99, n) do s:insert(row(j)) end
        box.commit()
    end
    print(n / (clock.monotonic() - t))
    os.exit(0)
end
for i = 1, n, 100 do
    box.begin()
    for j = i, math.min(i + 99, n) do s:insert(row(j)) end
    box.commit()
end
local ops = 20000
t = clock.monotonic()
for i = 1, ops do
    local k = i % n + 1
    if kind == 'path' then s.index.path:select('n' .. k)
    elseif kind == 'multikey' then s.index.multi:select(2 * k)
    elseif kind == 'collation' then s.index.coll:select('WORD' .. k)
    elseif kind == 'bitset' then s.index.bits:select(1, {{iterator = 'BITS_ALL_SET', limit = 10}})
    elseif kind == 'rtree_neighbor' then
        s.index.rt:select({{k % 1000, 0}}, {{iterator = 'NEIGHBOR', limit = 10}})
    else s.index.rt:select({{k % 1000, 0, k % 1000 + 2, 2}}, {{iterator = 'OVERLAPS'}})
    end
end
print(ops / (clock.monotonic() - t))
os.exit(0)
"""

CASES = [
    ("JSON-path TREE EQ lookups/s", "path"),
    ("multikey TREE EQ lookups/s", "multikey"),
    ("unicode_ci TREE EQ lookups/s", "collation"),
    ("BITSET BITS_ALL_SET (10 tuples) selects/s", "bitset"),
    ("RTREE NEIGHBOR (10 tuples) selects/s", "rtree_neighbor"),
    ("RTREE OVERLAPS selects/s", "rtree_overlaps"),
    ("inserts/s with all of them, 100 rows/txn", "insert"),
]

def index_only(rows: int, reps: int) -> None:
    """The BITSET and RTREE indexes of the Lua benchmark's space, driven from Python:
    the same rows (bits i % 64, point {i % 1000, i // 1000}) and searches."""
    from spindle.core.box.index import DupMode, IndexDef, make_index
    from spindle.core.box.key_def import KeyPart
    from spindle.core.iproto.constants import IteratorType as It

    class Space:
        name = "bench"

    ops = 20000
    figures: dict[str, list[float]] = {}
    for _ in range(reps):
        pk = make_index(Space(), IndexDef(0, "pk", "TREE", [KeyPart(0)]))
        bits = make_index(Space(), IndexDef(1, "bits", "BITSET", [KeyPart(4)], unique=False),
                          pk.key_def)
        rt = make_index(Space(), IndexDef(2, "rt", "RTREE", [KeyPart(5, "array")],
                                          unique=False), pk.key_def)
        tuples = [(i, None, None, None, i % 64, [i % 1000, i // 1000])
                  for i in range(1, rows + 1)]
        cases = [
            ("BITSET inserts/s", len(tuples),
             lambda i: bits.replace(None, tuples[i], DupMode.INSERT)),
            ("RTREE inserts/s", len(tuples),
             lambda i: rt.replace(None, tuples[i], DupMode.INSERT)),
            ("BITSET BITS_ALL_SET (10 tuples) selects/s", ops,
             lambda i: bits.select([1], It.BITS_ALL_SET, limit=10)),
            ("RTREE NEIGHBOR (10 tuples) selects/s", ops,
             lambda i: rt.select([(i + 1) % rows % 1000, 0], It.NEIGHBOR, limit=10)),
            ("RTREE OVERLAPS selects/s", ops,
             lambda i: rt.select([(i + 1) % rows % 1000, 0, (i + 1) % rows % 1000 + 2, 2],
                                 It.OVERLAPS)),
        ]
        for label, count, step in cases:
            start = time.process_time()
            for i in range(count):
                step(i)
            figures.setdefault(label, []).append(count / (time.process_time() - start))
    width = max(map(len, figures)) + 2
    print(f"{'index alone, in process (CPU time)':{width}} {'Spindle':>12}")
    for label, runs in figures.items():
        print(f"{label:{width}} {statistics.median(runs):12,.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default="", help="kinds to run, comma-separated")
    parser.add_argument("--index-only", action="store_true")
    args = parser.parse_args()
    if args.index_only:
        index_only(args.rows, args.reps)
        return
    compile_bytecode()
    only = set(filter(None, args.only.split(",")))
    binaries = {"spindle": SPINDLE, "tarantool": "tarantool"}
    results: dict[str, dict[str, float]] = {name: {} for name in binaries}
    for label, kind in CASES:
        if only and kind not in only:
            continue
        runs: dict[str, list[float]] = {name: [] for name in binaries}
        code = LUA.format(rows=args.rows, kind=kind)
        for _ in range(args.reps):
            for name, binary in binaries.items():
                runs[name].append(run_lua(binary, code))
        for name in binaries:
            results[name][label] = statistics.median(runs[name])
    print_side_by_side(results)


if __name__ == "__main__":
    main()
