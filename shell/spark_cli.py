"""`spindle spark SQL --dir DATA_DIR`: Spark SQL over a data directory, no instance.

    spindle spark "SELECT space_name, type, count(*) FROM xlog GROUP BY 1, 2" --dir ./var/i1
    spindle spark SQL --dir DIR [--master local[2] | spark://HOST:PORT] [--conf KEY=VALUE]...
                      [--mirror PARQUET_DIR] [--format table|tsv|json]

Views: `xlog` (every .xlog of DIR) and `snap` (every .snap). `--dir` is the
sources' `path` option, so a glob over several instances' directories works
too. With `--mirror`, sealed xlogs are first compacted into Parquet under that
directory (incrementally) and `xlog` reads Parquet for them plus the live WAL.

The rows are printed on stdout; errors on stderr, one line each (bad SQL:
Spark's message with its suggestion; a --dir that does not exist is refused
before Spark starts) with exit status 1. The JVM's own output (JDK warnings,
log4j, Python workers' tracebacks) goes to the log at VERBOSE level, i.e.
nowhere by default. The JVM this starts is shut down before returning.
"""
from __future__ import annotations

import argparse
import base64
import datetime
import glob
import json
import os
import sys

PROG = "spindle spark"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description="Run Spark SQL over views `xlog` "
                                     "and `snap` of a data directory.")
    parser.add_argument("sql", help="the query")
    parser.add_argument("--dir", required=True, help="data directory (or a glob of them)")
    parser.add_argument("--master", default="local[2]",
                        help="Spark master: local[N] (default local[2]) or spark://HOST:PORT")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (repeatable)")
    parser.add_argument("--mirror", metavar="DIR",
                        help="compact sealed xlogs into Parquet here and query the mirror")
    parser.add_argument("--format", choices=("table", "tsv", "json"), default="table")
    return parser.parse_args(argv)


def _conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"{PROG}: --conf wants KEY=VALUE, got {pair!r}")
        conf[key] = value
    return conf


def _text(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _json_value(value):
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if hasattr(value, "asDict"):
        return {k: _json_value(v) for k, v in value.asDict().items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return value


def render(columns: list[str], rows: list[tuple], fmt: str) -> str:
    if fmt == "json":
        return "".join(json.dumps({c: _json_value(v) for c, v in zip(columns, row)},
                                  ensure_ascii=False) + "\n" for row in rows)
    cells = [[_text(v) for v in row] for row in rows]
    if fmt == "tsv":
        return "".join("\t".join(line) + "\n" for line in [columns] + cells)
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"

    def line(values):
        return "|" + "|".join(f" {v:<{w}} " for v, w in zip(values, widths)) + "|\n"
    return rule + line(columns) + rule + "".join(line(c) for c in cells) + rule + \
        f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n"


def missing_dir(path: str) -> str | None:
    """Why `--dir` names no file at all (checked before Spark starts), or None."""
    if glob.has_magic(path):
        return None if glob.glob(path, recursive=True) else f"{path}: no match"
    return None if os.path.exists(path) else f"{path}: no such file or directory"


def main(argv: list[str]) -> int:
    options = parse_args(argv)
    conf = _conf(options.conf)
    missing = missing_dir(options.dir)
    if missing is not None:
        print(f"{PROG}: {missing}", file=sys.stderr)
        return 1
    from spindle.core import log
    from spindle.spark_ext.pruning import pruned_sql
    from spindle.spark_ext.runner import error_text
    from spindle.spark_ext.session import start_session, stop_session
    spark = start_session(options.master, conf, app_name="spindle spark",
                          output=lambda line: log.verbose("spark: %s", line))
    try:
        if options.mirror:
            from spindle.spark_ext.mirror import compact, register_mirror_views
            compact(options.dir, options.mirror)

            def register(**columns: str) -> None:
                register_mirror_views(spark, options.dir, options.mirror, **columns)
        else:
            from spindle.spark_ext.sources import register_views

            def register(**columns: str) -> None:
                register_views(spark, options.dir, **columns)
        try:
            df = pruned_sql(spark, options.sql, register)
            rows = df.collect()
        except Exception as exc:   # AnalysisException, ParseException, task failures
            print(f"{PROG}: {error_text(exc)}", file=sys.stderr)
            return 1
        sys.stdout.write(render(df.columns, [tuple(r) for r in rows], options.format))
        sys.stdout.flush()
        return 0
    finally:
        stop_session(spark)

