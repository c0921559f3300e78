"""Expected answers from `tarantoolctl cat` transcripts, computed without spark_ext.

The *.cat.txt fixtures are `tarantoolctl cat --show-system` outputs; for files
written during a test, tarantoolctl (installed with Tarantool 2.6.0) is run on
them. Space names are replayed from the transcripts themselves: the snapshot's
`_space` tuples, then `_space` INSERT/REPLACE/UPDATE(rename)/DELETE rows of the
xlogs in order.
"""
from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import yaml

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6"
SPACE = 280
# tarantoolctl prints types it has no name for as numbers.
NUMERIC_TYPES = {30: "RAFT", 31: "PROMOTE", 40: "CONFIRM", 41: "ROLLBACK"}
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_cat(text: str) -> list[dict]:
    """The row documents of a transcript (the "Processing file" line is not one)."""
    return [doc for doc in yaml.load_all(text, Loader=_Loader) if isinstance(doc, dict)]


def tarantoolctl() -> str:
    path = shutil.which("tarantoolctl")
    assert path, "tarantoolctl (Tarantool 2.6.0) must be installed: ./scripts/test installs it"
    return path


def run_cat(path: Path | str) -> list[dict]:
    result = subprocess.run([tarantoolctl(), "cat", str(path), "--show-system"],
                            capture_output=True, timeout=120, check=True)
    return parse_cat(result.stdout.decode())


def fixture_cat(path: Path) -> list[dict]:
    return parse_cat(Path(str(path) + ".cat.txt").read_text())


def row_type(doc: dict) -> str:
    value = doc["HEADER"]["type"]
    return NUMERIC_TYPES.get(value, str(value)) if isinstance(value, int) else value


def space_id(doc: dict) -> int | None:
    body = doc.get("BODY")
    return body.get("space_id") if isinstance(body, dict) else None


def snapshot_names(docs: list[dict]) -> dict[int, str]:
    return {doc["BODY"]["tuple"][0]: doc["BODY"]["tuple"][2]
            for doc in docs if space_id(doc) == SPACE}


def replay_names(names: dict[int, str], doc: dict) -> None:
    if space_id(doc) != SPACE:
        return
    kind, body = row_type(doc), doc["BODY"]
    if kind in ("INSERT", "REPLACE"):
        names[body["tuple"][0]] = body["tuple"][2]
    elif kind == "DELETE":
        names.pop(body["key"][0], None)
    elif kind == "UPDATE":       # tarantoolctl shows UPDATE operations under `tuple`
        for op in body.get("tuple", []):
            if op[0] == "=" and op[1] == 3:
                names[body["key"][0]] = op[2]


def counts_by_name(snap_docs: list[dict], xlog_docs: list[list[dict]]) -> Counter:
    """Counter[(space name or None, type)] over xlogs read in order."""
    names = snapshot_names(snap_docs)
    result: Counter = Counter()
    for docs in xlog_docs:
        for doc in docs:
            sid = space_id(doc)
            result[(names.get(sid) if sid is not None else None, row_type(doc))] += 1
            replay_names(names, doc)
    return result


def counts_by_id(docs: list[dict]) -> Counter:
    return Counter((space_id(doc), row_type(doc)) for doc in docs)


def data_dir_counts(data_dir: Path, cat=run_cat) -> Counter:
    """Expected `SELECT space_name, type, count(*) FROM xlog GROUP BY 1, 2` for a
    directory whose first xlog has a snapshot of the same signature."""
    xlogs = sorted(data_dir.glob("*.xlog"))
    first_sig = int(xlogs[0].name.split(".")[0])
    snap = data_dir / f"{first_sig:020d}.snap"
    snap_docs = cat(snap) if snap.exists() else []
    return counts_by_name(snap_docs, [cat(x) for x in xlogs])
