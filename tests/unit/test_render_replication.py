"""`\\set output table` for box.info.replication: one coloured row per peer.

The maps are handcrafted in the shape of 2.6.0's (fixtures/tarantool-2.6/box_info/*):
a map id -> {id, uuid, lsn, upstream = {status, idle, peer, lag, message},
downstream = {status, idle, vclock, lag, message, system_message}}.
"""
from __future__ import annotations

import re

from spindle.lua.serialize import FlowDict, UuidText
from spindle.shell.render_replication import (format_seconds, replication_peers,
                                              status_style)
from spindle.shell.render_table import render_table

UUID1 = "11111111-1111-4111-8111-111111111111"
UUID2 = "22222222-2222-4222-8222-222222222222"
UUID3 = "33333333-3333-4333-8333-333333333333"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def three_peers() -> dict:
    """As box.info.replication on instance 1 of three, peer 3 broken."""
    return {
        3: {"id": 3, "uuid": UuidText(UUID3), "lsn": 0,
            "upstream": {"status": "disconnected", "idle": 12.5,
                         "peer": "rep@127.0.0.1:3303", "lag": 0.0021,
                         "message": "connect, called on fd 21"},
            "downstream": {"status": "stopped", "idle": 75.0,
                           "vclock": FlowDict({1: 23}),
                           "message": "unexpected EOF when reading from socket",
                           "system_message": "Broken pipe"}},
        1: {"id": 1, "uuid": UuidText(UUID1), "lsn": 23},
        2: {"id": 2, "uuid": UuidText(UUID2), "lsn": 4,
            "upstream": {"status": "follow", "idle": 0.49093782099999,
                         "peer": "rep@127.0.0.1:3302", "lag": 0.00053572654724121},
            "downstream": {"status": "sync", "idle": 0.48967259199998,
                           "vclock": FlowDict({1: 23, 2: 4}), "lag": 0}},
    }


def lines_of(text: str) -> list[str]:
    return [line for line in ANSI.sub("", text).splitlines() if line.strip()]


def row_of(text: str, replica_id: int) -> list[str]:
    for line in lines_of(text):
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        if cells and cells[0] == str(replica_id):
            return cells
    raise AssertionError(f"no row for id {replica_id} in\n{text}")


def test_a_replication_map_becomes_one_row_per_peer_in_id_order():
    text = render_table([three_peers()], width=200)
    header = [cell.strip() for cell in lines_of(text)[1].strip("│").split("│")]
    assert header == ["id", "uuid", "lsn", "upstream", "up lag", "up idle",
                      "downstream", "down lag", "down idle", "message"]
    ids = [cells[0] for cells in (row_of(text, i) for i in (1, 2, 3))]
    assert ids == ["1", "2", "3"]
    body = ANSI.sub("", text)
    assert body.index("│  1 │") < body.index("│  2 │") < body.index("│  3 │")


def test_cells_short_uuid_lsn_status_lag_idle():
    text = render_table([three_peers()], width=200)
    assert row_of(text, 1)[:4] == ["1", "11111111", "23", "-"]   # self: no links
    assert row_of(text, 1)[6] == "-"
    assert row_of(text, 2)[:9] == ["2", "22222222", "4", "follow", "0.5 ms", "490.9 ms",
                                   "sync", "0.0 ms", "489.7 ms"]
    three = row_of(text, 3)
    assert three[3:9] == ["disconnected", "2.1 ms", "12.50 s", "stopped", "", "1m15s"]
    assert three[9] == ("upstream: connect, called on fd 21; downstream: unexpected EOF "
                        "when reading from socket (Broken pipe)")
    assert UUID1 not in text   # uuids are shortened


def test_statuses_are_coloured_follow_green_broken_red_others_yellow():
    text = render_table([three_peers()], width=200, color=True)
    assert "\x1b[32mfollow" in text
    assert "\x1b[33msync" in text
    assert "\x1b[1;31mstopped" in text
    assert "\x1b[1;31mdisconnected" in text
    assert [status_style(s) for s in ("follow", "connect", "auth", "initial_join",
                                      "loading", "stopped", "disconnected")] == \
        ["green", "yellow", "yellow", "yellow", "yellow", "bold red", "bold red"]


def test_without_color_there_are_no_escapes():
    assert "\x1b[" not in render_table([three_peers()], width=200, color=False)


def test_an_array_of_peers_is_recognised_too():
    peers = [three_peers()[1], three_peers()[2]]   # ids 1..n may serialize as an array
    text = render_table([peers], width=200)
    assert row_of(text, 2)[3] == "follow"
    assert row_of(text, 1)[1] == "11111111"


def test_one_message_is_not_prefixed_with_its_side():
    peers = {1: {"id": 1, "uuid": UUID1, "lsn": 0,
                 "upstream": {"status": "stopped", "idle": 1.0, "peer": "x",
                              "lag": 0.1, "message": "Duplicate key exists"}}}
    assert row_of(render_table([peers], width=200), 1)[9] == "Duplicate key exists"


def test_other_shapes_are_not_replication():
    assert replication_peers({}) is None
    assert replication_peers([]) is None
    assert replication_peers(42) is None
    assert replication_peers([{"id": 1, "name": "x"}]) is None           # no uuid/lsn
    assert replication_peers([{"id": 1, "uuid": UUID1, "lsn": 1, "x": 2}]) is None
    assert replication_peers({1: {"id": 1, "uuid": UUID1, "lsn": 1,
                                  "upstream": "follow"}}) is None         # not a map
    assert replication_peers([[1, UUID1]]) is None                        # _cluster rows
    # A generic array of maps still renders as the generic table.
    generic = render_table([[{"id": 1, "name": "x"}]], width=80)
    assert "name" in generic and "upstream" not in generic


def test_format_seconds():
    assert format_seconds(None) == ""
    assert format_seconds(0) == "0.0 ms"
    assert format_seconds(0.00053572654724121) == "0.5 ms"
    assert format_seconds(0.999) == "999.0 ms"
    assert format_seconds(1.5) == "1.50 s"
    assert format_seconds(187) == "3m07s"
    assert format_seconds(7300) == "2h01m"
    assert format_seconds("n/a") == "n/a"
