"""`spindle spark SQL --dir DIR` end to end: a real process with its own local Spark."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spindle.shell.spark_cli import missing_dir, render
from spindle.spark_ext.runner import error_text

from . import transcripts as tr

SPINDLE = str(Path(sys.executable).with_name("spindle"))


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([SPINDLE, "spark", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_cli_counts_over_a_data_directory_with_the_parquet_mirror(tmp_path):
    master = tr.FIXTURES / "master"
    result = run_cli("SELECT space_name, type, count(*) AS n FROM xlog GROUP BY 1, 2 "
                     "ORDER BY 1, 2", "--dir", str(master), "--mirror", str(tmp_path / "m"),
                     "--format", "tsv")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "space_name\ttype\tn"
    got = {}
    for line in lines[1:]:
        name, kind, n = line.split("\t")
        got[(None if name == "NULL" else name, kind)] = int(n)
    assert got == dict(tr.data_dir_counts(master, cat=tr.fixture_cat))
    # The sealed xlogs went to Parquet; the newest (live) one did not.
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "00000000000000000000.xlog.parquet", "00000000000000000025.xlog.parquet",
        "manifest.json"]


def test_cli_bad_sql_prints_sparks_message_and_fails():
    result = run_cli("SELECT nope FROM xlog", "--dir", str(tr.FIXTURES / "replica"))
    assert result.returncode == 1
    assert result.stdout == ""
    # one line: Spark's message (with its suggestion), no JVM output around it
    error = result.stderr.splitlines()
    assert len(error) == 1 and error[0].startswith("spindle spark: "), result.stderr
    assert "UNRESOLVED_COLUMN" in error[0] and "`nope`" in error[0], result.stderr
    assert "Did you mean" in error[0]


def test_render_formats():
    rows = [("test", "INSERT", 5), (None, "CONFIRM", 1)]
    table = render(["space_name", "type", "n"], rows, "table")
    assert table.splitlines()[1] == "| space_name | type    | n |"
    assert "| NULL       | CONFIRM | 1 |" in table and table.endswith("(2 rows)\n")
    assert render(["k"], [(b"\x01\xff",)], "json") == '{"k": "Af8="}\n'
    assert render(["k"], [(b"\x01\xff",)], "tsv") == "k\n01ff\n"


def test_error_text_drops_the_jvm_stack():
    spark_error = type("AnalysisException", (Exception,), {"__module__": "pyspark.errors"})
    exc = spark_error("[TABLE_OR_VIEW_NOT_FOUND] The table `nope` cannot be found. "
                      "SQLSTATE: 42P01; line 1 pos 14;\n'Project [*]\n"
                      "JVM stacktrace:\norg.apache...\n\tat x.y")
    assert error_text(exc) == ("[TABLE_OR_VIEW_NOT_FOUND] The table `nope` cannot be found. "
                               "(line 1, pos 14)")


def test_missing_dir_is_one_line_and_spark_is_not_started(tmp_path):
    assert missing_dir(str(tmp_path)) is None
    assert missing_dir(str(tmp_path / "*.xlog")) == f"{tmp_path}/*.xlog: no match"
    result = run_cli("SELECT count(*) FROM xlog", "--dir", "/nonexistent", timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == "spindle spark: /nonexistent: no such file or directory\n"
