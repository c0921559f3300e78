#!/usr/bin/env python3
"""Digest throughput: Spindle and real Tarantool 2.6 side by side.

    .venv/bin/python scripts/bench/digest.py [--rounds N] [--megabytes M]

The same Lua in both (`spindle -e`, `tarantool -e`): each function hashes M MiB (100
by default) as M calls on a 1 MiB string, and once more as one call on an M MiB
string; the figure is MB/s, best of N rounds (3). xxhash is not measured: 2.6.0's
digest has none (it came in a later Tarantool); murmur stands for the fast
non-cryptographic hash. Prints one row per function with the ratio Spindle /
Tarantool (higher is better: these are rates).
"""
from __future__ import annotations

import argparse
import subprocess
import tempfile

from bench_setup import SPINDLE, compile_bytecode, print_side_by_side

LUA = """
local digest, clock, crypto = require('digest'), require('clock'), require('crypto')
local mib = {mib}
local chunk = string.rep('0123456789abcdef', 65536)
local whole = string.rep(chunk, mib)
local function rate(fn, data, times)
    local t = clock.monotonic()
    for _ = 1, times do fn(data) end
    return mib / (clock.monotonic() - t)
end
local function object_sha256(data)
    local d = crypto.digest.sha256.new()
    d:update(data)
    return d:result()
end
for _, f in ipairs({{'sha256', digest.sha256}, {'md5', digest.md5},
                    {'crc32', digest.crc32}, {'murmur', digest.murmur},
                    {'sha256 (crypto.digest object)', object_sha256}}) do
    print(f[1] .. ' 1 MiB calls', rate(f[2], chunk, mib))
    print(f[1] .. ' one call', rate(f[2], whole, 1))
end
os.exit(0)
"""


def run(binary: str, mib: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run([binary, "-e", LUA.replace("{mib}", str(mib))], cwd=cwd,
                             capture_output=True, stdin=subprocess.DEVNULL, text=True,
                             timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} failed: {out.stderr[-500:]}")
    rates = {}
    for line in out.stdout.splitlines():
        name, _, value = line.rpartition("\t")
        rates[name] = float(value)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=100)
    args = parser.parse_args()
    compile_bytecode()
    results: dict[str, dict[str, float]] = {"spindle": {}, "tarantool": {}}
    for _ in range(args.rounds):
        for side, binary in (("spindle", SPINDLE), ("tarantool", "tarantool")):
            for name, value in run(binary, args.megabytes).items():
                results[side][name] = max(results[side].get(name, 0.0), value)
    print(f"MB/s, best of {args.rounds}, {args.megabytes} MiB per figure")
    print_side_by_side(results)


if __name__ == "__main__":
    main()
