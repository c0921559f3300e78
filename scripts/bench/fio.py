#!/usr/bin/env python3
"""fio throughput: Spindle and real Tarantool 2.6 side by side.

    .venv/bin/python scripts/bench/fio.py [--size-mb 100] [--reps 3]

The same Lua in both (`spindle -e` / `tarantool -e`, each in a fresh temporary
directory): write a file of --size-mb with fh:write() in chunks, fsync, close; then
read it back with fh:read() in chunks of the same size. Two chunk sizes: 1 MB (the
copy dominates) and 64 KB (the cost of a call dominates). Each figure is the median
of --reps runs, the two servers in alternation. MB/s: higher is better; ratio =
Spindle / Tarantool.

    .venv/bin/python scripts/bench/fio.py --before DIR

adds a third column in the alternation: Spindle run from DIR, a directory holding an
earlier `spindle` package (`mkdir -p DIR/spindle && git archive REV | tar -x -C
DIR/spindle`), put first on PYTHONPATH; its ratio is to Tarantool as well.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from bench_setup import SPINDLE, compile_bytecode, print_side_by_side

LUA = """
local fio, clock = require('fio'), require('clock')
local size, chunk = {size} * 1048576, {chunk} * 1024
local data = string.rep('0123456789abcdef', chunk / 16)
local f = fio.open('bench.dat', {{'O_CREAT', 'O_WRONLY', 'O_TRUNC'}}, tonumber('644', 8))
local t = clock.monotonic()
for _ = 1, size / chunk do assert(f:write(data)) end
f:fsync()
f:close()
local write = clock.monotonic() - t
f = fio.open('bench.dat', {{'O_RDONLY'}})
t = clock.monotonic()
local total = 0
while true do
    local got = f:read(chunk)
    if got == nil or #got == 0 then break end
    total = total + #got
end
local read = clock.monotonic() - t
f:close()
assert(total == size, 'read ' .. total)
fio.unlink('bench.dat')
print(size / 1048576 / write, size / 1048576 / read)
os.exit(0)
"""


def run(binary: str, size_mb: int, chunk_kb: int, pythonpath: str | None = None
        ) -> tuple[float, float]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run([binary, "-e", LUA.format(size=size_mb, chunk=chunk_kb)],
                             cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL,
                             text=True, timeout=600, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} failed: {out.stderr[-500:]}")
    write, read = out.stdout.split()[-2:]
    return float(write), float(read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--before", metavar="DIR",
                        help="also run an earlier Spindle package found in DIR")
    args = parser.parse_args()
    compile_bytecode()
    # name -> (binary, PYTHONPATH); the earlier Spindle first in each round
    binaries: dict[str, tuple[str, str | None]] = {}
    if args.before:
        subprocess.run([sys.executable, "-m", "compileall", "-q", args.before],
                       check=False, stdout=subprocess.DEVNULL)
        binaries["before"] = (SPINDLE, os.path.abspath(args.before))
    binaries["spindle"] = (SPINDLE, None)
    binaries["tarantool"] = ("tarantool", None)
    results: dict[str, dict[str, float]] = {name: {} for name in binaries}
    for chunk_kb in (1024, 64):
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in binaries}
        for _ in range(args.reps):
            for name, (binary, path) in binaries.items():
                samples[name].append(run(binary, args.size_mb, chunk_kb, path))
        for name, runs in samples.items():
            results[name][f"write MB/s, {chunk_kb} KB chunks"] = statistics.median(
                w for w, _ in runs)
            results[name][f"read MB/s, {chunk_kb} KB chunks"] = statistics.median(
                r for _, r in runs)
    print_side_by_side(results)
    if args.before:
        print("\nearlier Spindle (--before):")
        print_side_by_side({"spindle": results["before"], "tarantool": results["tarantool"]})


if __name__ == "__main__":
    main()
