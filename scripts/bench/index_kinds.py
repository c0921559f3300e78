#!/usr/bin/env python3
"""Index kinds (issue 23 item 4): Spindle and real Tarantool 2.6.0 side by side.

    .venv/bin/python scripts/bench/index_kinds.py [--rows N] [--reps K]

From Lua, over a space of `--rows` tuples: lookups/s through a JSON-path TREE index
(EQ on a unique 'doc.name'), a multikey TREE index (EQ on one element), a
unicode_ci-collated TREE index (EQ, unique), a BITSET (BITS_ALL_SET of one bit, the
first 10 tuples), an RTREE (NEIGHBOR of a point, the 10 nearest; OVERLAPS of a small
box), and inserts/s into a space carrying all of those indexes (100 rows/txn).

Spindle's BITSET and RTREE look at every entry per search (core/box/index_kinds.py),
so their figures fall with the number of rows; 2.6.0's bitmaps and R-tree do not.
Each figure is the median of `--reps` runs, the servers alternating, each run in a
fresh work dir with `wal_mode = 'write'`. Rates: higher is better; the ratio is
Spindle / Tarantool.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile

from bench_setup import SPINDLE, compile_bytecode, print_side_by_side

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
local ops = kind == 'bitset' and 200 or kind:sub(1, 5) == 'rtree' and 100 or 20000
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


def run_lua(binary: str, code: str) -> float:
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run([binary, "-e", code], cwd=cwd, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary}: {proc.stderr[-800:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    compile_bytecode()
    binaries = {"spindle": SPINDLE, "tarantool": "tarantool"}
    results: dict[str, dict[str, float]] = {name: {} for name in binaries}
    for label, kind in CASES:
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
