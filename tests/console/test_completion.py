"""Completion candidates from the live Lua state (no pty)."""
from __future__ import annotations

import pytest

from spindle.lua.completion import complete, split_tail
from spindle.lua.instance import Instance

SETUP = """
fiber = require('fiber')
s = 'abc'
t = {alpha = 1, beta = {gamma = 2}}
obj = setmetatable({own = 1}, {__index = {inherited = function() end, value = 2}})
ch = fiber.channel(1)
"""


@pytest.fixture(scope="module")
def names():
    instance = Instance()
    found = {}

    def main():
        instance.run_chunk(SETUP, "=setup")
        for text in ["fiber.", "fiber.sl", "s:up", "t.", "t.beta.", "pri", "x = pr",
                     "obj.", "obj:", "ch:", "string.fo", "nosuch.", "1.5", "'fiber.",
                     "", "t. be", "-- fiber."]:
            found[text] = [c.name for c in complete(instance.runtime, text)]

    instance.sched.run(main)
    instance.sched.shutdown(timeout=1.0)
    return found


@pytest.mark.parametrize("text, expected", [
    ("fiber.sl", ["sleep"]),
    ("s:up", ["upper"]),
    ("t.", ["alpha", "beta"]),
    ("t.beta.", ["gamma"]),
    ("t. be", ["beta"]),
    ("string.fo", ["format"]),
    ("obj:", ["inherited"]),            # methods only, found through __index
    ("nosuch.", []),
    ("1.5", []),                        # a number, not a field access
    ("'fiber.", []),                    # inside a string
    ("-- fiber.", []),                  # inside a comment
    ("", []),
])
def test_candidates(names, text, expected):
    assert names[text] == expected


def test_module_fields_and_globals(names):
    assert {"create", "sleep", "channel", "cond", "self"} <= set(names["fiber."])
    assert names["pri"] == ["print"]
    assert names["x = pr"] == ["print"]
    assert set(names["obj."]) == {"own", "inherited", "value"}
    assert {"put", "get", "close"} <= set(names["ch:"])


def test_split_tail():
    assert split_tail("box.space.test:sel") == (["box", "space", "test"], ":", "sel")
    assert split_tail("return fi") == ([], "", "fi")
    assert split_tail("x = ") is None
