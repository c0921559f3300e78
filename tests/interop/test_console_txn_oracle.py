"""Transactions typed across console lines behave as in Tarantool 2.6.0: waiting for
the next line is a yield, so a transaction left open is aborted and its commit fails;
a fiber.sleep inside a transaction aborts it too."""
from __future__ import annotations

from .oracle import console_both

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


def test_console_transactions_match_tarantool(tmp_path):
    theirs, ours = console_both(STATEMENTS, tmp_path)
    assert ours == theirs
