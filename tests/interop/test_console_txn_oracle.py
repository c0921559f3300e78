"""Transactions typed across console lines behave as in Tarantool 2.6.0: waiting for
the next line is a yield, so a transaction left open is aborted and its commit fails;
a fiber.sleep inside a transaction aborts it too."""
from __future__ import annotations

import subprocess

from .oracle import SPINDLE, tarantool_binary

STATEMENTS = """\
box.cfg{log_level = 1}
s = box.schema.space.create('t') s:create_index('pk')
box.begin()
s:insert{1}
box.commit()
s:select()
box.begin() s:insert{2} box.commit()
s:select()
box.begin() s:insert{3} require('fiber').sleep(0) box.commit()
s:select()
box.rollback()
box.begin() s:insert{4} box.rollback()
s:select()
"""


def documents(output: str) -> list[str]:
    """The YAML documents printed, without prompts, blank lines or log lines."""
    lines = [line for line in output.splitlines()
             if line.strip() and not line.startswith("tarantool>")
             and " I> " not in line]
    return "\n".join(lines).split("...")


def test_console_transactions_match_tarantool(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "s").mkdir()
    real = subprocess.run([tarantool_binary(), "-e", "require('console').start() os.exit(0)"],
                          input=STATEMENTS, cwd=tmp_path / "t", capture_output=True,
                          text=True, timeout=60)
    ours = subprocess.run([SPINDLE], input=STATEMENTS, cwd=tmp_path / "s",
                          capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stderr
    assert documents(ours.stdout) == documents(real.stdout)
