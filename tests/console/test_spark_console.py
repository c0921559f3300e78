"""box.spark typed at the real console (a pty): what the screen shows while Spark
starts and runs, and that nothing of Spark's own output ever lands there.

One console and one JVM for the whole module (Spark takes 10-60 s to start on a
busy machine): a single test walks through the statements a user types, each
checked on the screen text between its prompt and the next.
"""
from __future__ import annotations

import re

import pytest

from ..integration.cluster import wait_for

# (a deadline for the whole walk: each Spark step may take minutes on a loaded machine)
pytestmark = pytest.mark.timeout(1500)

SPARK_TIMEOUT = 300.0        # the first call starts the JVM and the SparkSession
# What Spark's JVM and its Python workers print on their own: none of it may reach
# the screen. (Not the stall watchdog's warning: how long a fiber ran is the
# machine's load as much as Spark's doing, and tests do not assert on time.)
CHATTER = re.compile(r"WARNING|WARN |ERROR|Traceback|BrokenPipe|daemon\.py|Exception|"
                     r"log4j|jdk\.incubator")
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")


def statement(console, line: str, timeout: float = SPARK_TIMEOUT) -> tuple[str, str]:
    """Type `line`; return (its YAML document's body, all the screen showed from
    the line's echo to the next prompt)."""
    start = console.pos
    console.send(line + "\r")
    body = console.expect(r"---\r?\n(.*?)\.\.\.\r?\n", timeout).group(1)
    console.prompt()
    return body.replace("\r\n", "\n"), console.text[start:console.pos]


def value(console, expr: str, timeout: float = SPARK_TIMEOUT) -> str:
    body, _ = statement(console, expr, timeout)
    assert body.startswith("- "), body
    return body[2:].strip()


def test_box_spark_at_the_console(spawn_console, tmp_path):
    console = spawn_console(cwd=str(tmp_path))

    # Before box.cfg box.spark is refused as box.space is.
    body, _ = statement(console, "box.spark", 10)
    assert "Please call box.cfg{} first" in body
    statement(console, "box.cfg{}", 30)
    statement(console, "box.schema.space.create('t'):create_index('pk') "
                       "for i = 1, 12000 do box.space.t:insert{i, 'v' .. i} end", 60)
    statement(console, "box.snapshot() box.space.t:insert{12001, 'after'}", 30)
    shown_from = console.pos

    # The first call: what it waits for is on the screen long before the result.
    console.send("box.spark.sql([[SELECT count(*) AS n FROM xlog WHERE space_name = 't']])\r")
    console.expect(r"— starting Spark", 60)
    console.expect(r"---\r?\n- - \[12001\]\r?\n\.\.\.", SPARK_TIMEOUT)
    console.prompt()

    # A result refused for its size, then a query reading the same xlog again
    # (its Python workers were stopped mid-batch by the refusal): one error
    # document, nothing else.
    body, _ = statement(console, "box.spark.sql([[SELECT * FROM xlog]])")
    assert "result has more than 10000 rows" in body
    body, _ = statement(console, "box.spark.sql([[SELECT count(*) FROM xlog "
                                 "WHERE space_name = 't']])[1][1]")
    assert body == "- 12001\n"

    # Ctrl-C on a running query: the error, then a clean prompt (no bar after it).
    console.send("box.spark.sql([[SELECT count(*) FROM range(100000000000) a "
                 "CROSS JOIN range(10) b]])\r")
    console.expect(r"tasks", SPARK_TIMEOUT)          # a stage runs
    console.send("\x03")
    console.expect(r"- error: fiber is cancelled\r?\n\.\.\.\r?\n", 60)
    console.prompt()
    after_prompt = console.pos
    wait_for(lambda: value(console, "box.spark.jobs()[4].state") == "cancelled", 300,
             "the cancelled job to end")
    assert "tasks" not in console.text[after_prompt:]

    # An SQL error: one line naming the cause, with Spark's suggestion.
    body, _ = statement(console, "e = select(2, pcall(box.spark.sql, 'SELECT nme FROM xlog')) "
                                 "return e.message:find('\\n') == nil, e.message")
    assert body.startswith("- true\n") and "Did you mean" in body and "`lsn`" in body

    # compact() is a table of fields; jobs() shows readable times and counters
    # that add up.
    statement(console, "c = box.spark.compact()")
    assert value(console, "type(c)") == "table"
    assert value(console, "c.converted") == "1"
    assert int(value(console, "c.rows")) >= 12000
    assert value(console, "box.spark.jobs()[1].state") == "done"
    assert STAMP.match(value(console, "box.spark.jobs()[1].created").strip("'"))
    assert value(console, "box.spark.jobs()[1].tasks_done == box.spark.jobs()[1].tasks") \
        == "true"
    assert value(console, "box.spark.jobs()[4].tasks_done < box.spark.jobs()[4].tasks") \
        == "true"

    # Table output heads a result's columns with its names.
    assert value(console, "\\set output table") == "true"
    console.send("box.spark.sql([[SELECT space_name, count(*) AS n FROM xlog "
                 "WHERE space_name = 't' GROUP BY space_name]])\r")
    console.expect(r"│ space_name\s*│ n\s*│.*│ t\s*│ 12001\s*│", SPARK_TIMEOUT)
    console.prompt()
    assert value(console, "\\set output yaml") == "true"

    screen = console.text[shown_from:]
    assert not CHATTER.search(screen), CHATTER.search(screen)
    assert not (tmp_path / "spark-warehouse").exists()
    console.send("os.exit(0)\r")
    assert console.wait_exit(120) == 0
