"""The columnar mirror: sealed xlogs as Parquet, plus the live tail from the WAL.

`compact(data_dir, out_dir)` writes one Parquet file per sealed xlog (every
xlog of the directory but the newest, which the WAL may still be appending
to) with exactly the rows and columns the `xlog` source gives for it, space
names included. It is incremental: `manifest.json` in out_dir lists the files
done (name, size, rows), and a file listed there is not read again. Each
Parquet file is written under a temporary name and renamed, and the manifest
is rewritten (also by rename) after each file, so an interrupted compaction
leaves no half file and redoes at most the file it was on. Parquet files of
xlogs that the instance's GC has since deleted stay: the mirror keeps history.

`mirror_dataframe(spark, data_dir, out_dir)` is the query side: Parquet for
the files in the manifest, the `xlog` source for all others (the live tail),
as one DataFrame with the same columns.

compact() needs only pyarrow (no Spark): it can run anywhere, e.g. in a
thread of the server.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import pyarrow.parquet as pq

from .plan import DEFAULT_SPLIT_BYTES, discover, plan_tasks
from .rows import ARROW_SCHEMA, SPARK_DDL
from .scan import XLOG_KIND, scan

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


@dataclass
class CompactResult:
    converted: list[str] = field(default_factory=list)   # xlog names written now
    skipped: list[str] = field(default_factory=list)     # already in the manifest
    live: str | None = None                              # the newest xlog, left alone
    rows: int = 0


def load_manifest(out_dir: str) -> dict:
    path = os.path.join(out_dir, MANIFEST)
    if not os.path.exists(path):
        return {"version": MANIFEST_VERSION, "files": {}}
    with open(path) as f:
        manifest = json.load(f)
    if manifest.get("version") != MANIFEST_VERSION:
        raise ValueError(f"{path}: unknown manifest version {manifest.get('version')!r}")
    return manifest


def _save_manifest(out_dir: str, manifest: dict) -> None:
    path = os.path.join(out_dir, MANIFEST)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sealed_xlogs(data_dir: str) -> tuple[list[str], str | None]:
    """(sealed xlog paths in WAL order, the newest xlog or None)."""
    files = [info.path for info in discover(data_dir, XLOG_KIND)]
    if not files:
        return [], None
    return files[:-1], files[-1]


def compact(data_dir: str, out_dir: str, *, split_bytes: int = DEFAULT_SPLIT_BYTES,
            ) -> CompactResult:
    """Convert the sealed xlogs of `data_dir` not yet in `out_dir`'s manifest."""
    data_dir = os.path.abspath(data_dir)
    os.makedirs(out_dir, exist_ok=True)
    manifest = load_manifest(out_dir)
    done = manifest["files"]
    sealed, live = sealed_xlogs(data_dir)
    result = CompactResult(live=os.path.basename(live) if live else None)
    todo = []
    for path in sealed:
        name = os.path.basename(path)
        entry = done.get(name)
        if entry is not None and entry["size"] == os.path.getsize(path):
            result.skipped.append(name)
        else:
            todo.append(path)
    if not todo:
        return result
    # One plan over the directory gives every file its starting space names;
    # files already done and the live one are excluded from it.
    exclude = {p for p in sealed if p not in todo} | ({live} if live else set())
    by_file: dict[str, list] = {}
    for task in plan_tasks(data_dir, XLOG_KIND, split_bytes=split_bytes, exclude=exclude):
        by_file.setdefault(task.path, []).append(task)
    for path in todo:
        name = os.path.basename(path)
        size = os.path.getsize(path)
        parquet_name = name + ".parquet"
        rows = _write_parquet(by_file.get(path, []), os.path.join(out_dir, parquet_name))
        done[name] = {"source": path, "size": size, "rows": rows, "parquet": parquet_name}
        _save_manifest(out_dir, manifest)
        result.converted.append(name)
        result.rows += rows
    return result


def _write_parquet(tasks: list, target: str) -> int:
    tmp = target + ".tmp"
    rows = 0
    with pq.ParquetWriter(tmp, ARROW_SCHEMA) as writer:
        for task in tasks:
            for batch in scan(task):
                writer.write_batch(batch)
                rows += batch.num_rows
    os.replace(tmp, target)
    return rows


def mirror_dataframe(spark, data_dir: str, out_dir: str, **options: str):
    """Parquet for the files the manifest lists, the raw reader for the rest."""
    data_dir = os.path.abspath(data_dir)
    done = load_manifest(out_dir)["files"]
    parquet_files = [os.path.join(out_dir, entry["parquet"]) for entry in done.values()]
    reader = spark.read.format(XLOG_KIND).option(
        "exclude", json.dumps([os.path.join(data_dir, name) for name in done]))
    for key, value in options.items():
        reader = reader.option(key, value)
    live = reader.load(data_dir)
    if not parquet_files:
        return live
    # Parquet prunes columns itself; select the same ones the live part has.
    sealed = spark.read.schema(SPARK_DDL).parquet(*parquet_files).select(*live.columns)
    return sealed.unionByName(live)


def register_mirror_views(spark, data_dir: str, out_dir: str, **options: str) -> None:
    """Views `xlog` (mirror + live tail) and `snap` (raw) over a data directory."""
    mirror_dataframe(spark, data_dir, out_dir, **options).createOrReplaceTempView("xlog")
    reader = spark.read.format("snap")
    for key, value in options.items():
        reader = reader.option(key, value)
    reader.load(data_dir).createOrReplaceTempView("snap")
