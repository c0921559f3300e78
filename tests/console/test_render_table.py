"""Table output's layout as text (no pty): golden files at fixed terminal widths.

Each golden file in tests/console/golden/ is what the console prints for one reply
at the width in its name, without colour. To look at a change on purpose, run with
SPINDLE_GOLDEN_UPDATE=1 (the files are rewritten) and read the diff.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from spindle.lua.console import Reply
from spindle.lua.serialize import UuidText
from spindle.shell.render_replication import election_line, election_state
from spindle.shell.render_table import render_reply, render_table

GOLDEN = Path(__file__).parent / "golden"
PEOPLE = ["id", "name", "age"]


def golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("SPINDLE_GOLDEN_UPDATE") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs:\n{text}"


def table_reply(values, columns=None, layout="table") -> Reply:
    return Reply(values=values, text="(the YAML text)\n", layout=layout,
                 columns=columns if columns is not None else [None] * len(values))


def test_a_tuple_and_a_select_have_their_format_names():
    golden("tuple_w80", render_reply(table_reply([[1, "Ann", 30]], [PEOPLE]), width=80))
    rows = [[1, "Ann", 30], [2, "Bob", 41, "extra"]]
    golden("select_w80", render_reply(table_reply([rows], [PEOPLE]), width=80))


def test_several_values_are_one_table():
    golden("two_tuples_w80", render_reply(
        table_reply([[1, "Ann", 30], [2, "Bob", 41]], [PEOPLE, PEOPLE]), width=80))
    golden("scalars_w80", render_reply(table_reply([1, "x", True, None]), width=80))


def test_tuples_of_two_formats_are_headed_by_position():
    text = render_reply(table_reply([[1, "a"], [2, "b"]], [["id", "name"], ["k", "v"]]))
    assert "col1" in text and "name" not in text and "│ 2" in text


def test_maps_with_the_same_keys_share_a_table_others_do_not():
    text = render_table([{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"c": 5}], width=80)
    assert text.count("┌") == 2 and "│ 3 │ 4 │" in text
    golden("array_of_maps_w80", render_table(
        [[{"id": 1, "name": "x", "tags": [1, 2]}, {"id": 2}]], width=80))


def test_a_wide_table_folds_into_the_vertical_layout():
    row = [1, "a long name " * 4, "a long comment " * 4, 7]
    names = ["id", "name", "comment", "n"]
    wide = render_reply(table_reply([[row, [2, "b", "c", 8]]], [names]), width=100)
    golden("folded_w100", wide)
    assert render_reply(table_reply([[row, [2, "b", "c", 8]]], [names]), width=300) \
        .startswith("┌────┬─")   # it fits: horizontal


def test_ttable_is_always_vertical():
    rows = [[1, "Ann", 30], [2, "Bob", 41], [3, "Cy", 52]]
    golden("ttable_w80", render_reply(table_reply([rows], [PEOPLE], "ttable"), width=80))
    # rows that do not fit side by side are cut into several tables
    many = [[i, "name %d" % i, i * 10] for i in range(1, 13)]
    text = render_reply(table_reply([many], [PEOPLE], "ttable"), width=60)
    assert text.count("┌") > 1
    assert all(len(line) <= 60 for line in text.splitlines())


def test_what_is_not_a_table_is_yaml():
    assert render_table([[]], width=80) == "---\n- []\n...\n"
    assert render_table([], "boom") == "---\n- error: boom\n...\n"
    reply = Reply(values=[True], text="---\n- true\n...\n")   # a command's reply
    assert render_reply(reply) == reply.text
    error = Reply(error="boom", text="---\n- error: boom\n...\n", layout="table")
    assert render_reply(error) == error.text


PEERS = {
    1: {"id": 1, "uuid": UuidText("11111111-1111-4111-8111-111111111111"), "lsn": 5},
    2: {"id": 2, "uuid": UuidText("22222222-2222-4222-8222-222222222222"), "lsn": 3,
        "upstream": {"status": "follow", "idle": 0.25, "peer": "rep@127.0.0.1:3302",
                     "lag": 0.001},
        "downstream": {"status": "follow", "idle": 0.5, "vclock": {1: 5}, "lag": 0.002}},
}
ELECTION = {"mode": "candidate", "state": "follower", "term": 4, "vote": 2, "leader": 2,
            "id": 1}


def test_replication_with_election_has_a_leader_column_and_a_summary_line():
    text = render_reply(table_reply([PEERS]), width=130, election=lambda: dict(ELECTION))
    golden("replication_election_w130", text)
    plain = render_reply(table_reply([PEERS]), width=130, election=lambda: None)
    assert "election" not in plain and "leader" not in plain


def test_election_state_is_read_from_a_statement_reply():
    seen = []

    def submit(statement):
        seen.append(statement)
        return Reply(values=[dict(ELECTION)])

    assert election_state(submit) == ELECTION and "box.info.election" in seen[0]
    assert election_state(lambda s: Reply(values=[None])) is None       # election off
    assert election_state(lambda s: Reply(error="x")) is None

    def broken(statement):
        raise RuntimeError("gone")

    assert election_state(broken) is None
    line = election_line(dict(ELECTION, leader=0, vote=0)).plain
    assert line == "election: term 4, no leader; this instance (id 1): follower (candidate)"


@pytest.mark.parametrize("width", [40, 80, 120])
def test_nothing_is_wider_than_the_terminal(width):
    rows = [[i, "x" * (i * 7), {"nested": [i, i]}, "y" * 50] for i in range(1, 6)]
    for layout in ("table", "ttable"):
        text = render_reply(table_reply([rows], [["id", "long", "map", "tail"]], layout),
                            width=width)
        assert all(len(line) <= width for line in text.splitlines()), text


def test_tables_that_fit_are_drawn_as_rich_draws_them():
    """Tables that fit unwrapped are drawn without rich (seconds for a big select);
    the text must be rich's to the character, wide letters and blanks included."""
    import random

    from spindle.shell import render_table as module

    words = ["a", "bc", "日本", "долго", "x y", "", " lead", "trail ", "1" * 20]
    generator = random.Random(7)
    for _ in range(300):
        count = generator.randint(1, 6)
        heads = [generator.choice(["id", "name", "col3", "сообщение", "k"])
                 for _ in range(count)]
        rows = [[generator.choice(words) for _ in range(count)]
                for _ in range(generator.randint(1, 5))]
        draw = module._Drawer(generator.choice([30, 60, 120]), False)
        widths = [module._text_width([name] + [row[i] for row in rows])
                  for i, name in enumerate(heads)]
        if module._natural_width(widths) <= draw.width:
            assert draw.grid(heads, rows, False) == \
                draw._print(module._horizontal(heads, rows))
        for part in draw._side_by_side(heads, rows):
            assert draw._vertical(heads, part) == draw._print(module._transposed(heads, part))
