#!/usr/bin/env python3
"""Regenerate core/box/bootstrap.mp: the system rows a fresh Tarantool 2.6.0 holds.

    .venv/bin/python scripts/dev/gen_bootstrap.py

Starts real Tarantool 2.6.0 (`box.cfg{}`) in a temporary directory, reads its
bootstrap snapshot with Spindle's reader and keeps every row except the two that
bootstrap adds per replica set (`_schema` 'cluster' and the `_cluster` row), which
Spindle writes itself. The file is data (the 2.6.0 schema as facts: spaces, indexes,
users, privileges, functions, collations), a msgpack array of [space_id, tuple].
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import msgpack

from spindle.core.xlog.files import XlogReader, list_files
from spindle.core.iproto.request import decode_dml_body

OUT = Path(__file__).resolve().parents[2] / "core" / "box" / "bootstrap.mp"
SCHEMA, CLUSTER = 272, 320


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["tarantool", "-e", "box.cfg{log_level=1} os.exit(0)"], cwd=tmp,
                       check=True, timeout=60)
        snap = list_files(tmp, ".snap")[0]
        rows = []
        with XlogReader(snap.path) as reader:
            for row in reader.rows():
                request = decode_dml_body(row.body, row.type)
                if request.space_id == CLUSTER:
                    continue
                if request.space_id == SCHEMA and request.tuple[0] == "cluster":
                    continue
                rows.append([request.space_id, request.tuple])
    OUT.write_bytes(msgpack.packb(rows, use_bin_type=True))
    print(f"{OUT}: {len(rows)} rows")


if __name__ == "__main__":
    main()
