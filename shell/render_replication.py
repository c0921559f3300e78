"""`box.info.replication` under `\\set output table`: one coloured row per peer.

The value is recognised by its shape (a map id -> peer, or an array of peers, where
each peer is a map with id, uuid and lsn and at most the other keys 2.6.0 shows), so
the same table appears for `box.info.replication`, a `\\watch` of it, or a copy of it
kept in a variable. Statuses are Tarantool's applier/relay strings: `follow` is the
healthy steady state (green); `stopped` and `disconnected` need a human (red);
everything else is a link on its way somewhere (yellow). With election on, a column
says which row is the leader, in which term (and what the instance showing the table
is), and a line over the table sums box.info.election up.
"""
from __future__ import annotations

from typing import Any, Callable

from rich import box
from rich.table import Table
from rich.text import Text

# The keys 2.6.0 puts in a peer's entry (box_info.md); `name` is 3.x's, harmless here.
PEER_KEYS = frozenset(("id", "uuid", "lsn", "upstream", "downstream", "name"))
REQUIRED_KEYS = ("id", "uuid", "lsn")

HEALTHY = frozenset(("follow",))
BROKEN = frozenset(("stopped", "disconnected"))

COLUMNS = ("id", "uuid", "lsn", "upstream", "up lag", "up idle",
           "downstream", "down lag", "down idle", "message")

SHORT_UUID = 8   # the first group of a uuid tells peers of one replica set apart


def status_style(status: Any) -> str:
    if status in HEALTHY:
        return "green"
    if status in BROKEN:
        return "bold red"
    return "yellow"


def replication_peers(value: Any) -> list[dict] | None:
    """The peers of a `box.info.replication`-shaped value, ordered by id; None when
    the value has another shape."""
    if isinstance(value, dict):
        peers = list(value.values())
    elif isinstance(value, list):
        peers = value
    else:
        return None
    if not peers or not all(_is_peer(peer) for peer in peers):
        return None
    return sorted(peers, key=lambda peer: _sort_key(peer.get("id")))


def _is_peer(peer: Any) -> bool:
    if not isinstance(peer, dict) or not all(isinstance(key, str) for key in peer):
        return False
    if not all(key in peer for key in REQUIRED_KEYS) or not set(peer) <= PEER_KEYS:
        return False
    return all(isinstance(peer.get(side, {}), dict) for side in ("upstream", "downstream"))


def _sort_key(replica_id: Any) -> tuple:
    return (0, replica_id) if isinstance(replica_id, int) else (1, str(replica_id))


def replication_table(peers: list[dict], election: dict | None = None) -> Table:
    """The peers' table; with `election` (box.info.election of the instance showing
    it, plus its id: election_state()) a column telling who leads in which term."""
    table = Table(box=box.SQUARE, header_style="bold", show_lines=False)
    columns = COLUMNS if election is None else COLUMNS[:3] + ("election",) + COLUMNS[3:]
    for name in columns:
        justify = "right" if name in ("id", "lsn") or name.endswith(("lag", "idle")) \
            else "left"
        table.add_column(name, justify=justify, overflow="fold",
                         no_wrap=name != "message")
    for peer in peers:
        upstream = peer.get("upstream")
        downstream = peer.get("downstream")
        role = () if election is None else (_role(peer.get("id"), election),)
        table.add_row(_plain(peer.get("id")), _short_uuid(peer.get("uuid")),
                      _plain(peer.get("lsn")), *role,
                      *_side_cells(upstream), *_side_cells(downstream),
                      _message(upstream, downstream))
    return table


# ===================================================================== election

# What the console evaluates (as a statement: on the peer of a `spindle connect` too)
# to decorate a replication table: box.info.election and the instance's id, or nil
# where election is off (or unknown: 2.6.0, box.cfg not called).
ELECTION_STATE = (
    "(function() "
    "local ok, mode = pcall(function() return box.cfg.election_mode end) "
    "if not ok or mode == nil or mode == 'off' then return nil end "
    "local e = box.info.election "
    "return {mode = mode, state = e.state, term = e.term, vote = e.vote, "
    "leader = e.leader, id = box.info.id} end)()")


def election_state(submit: Callable[[str], Any]) -> dict | None:
    """box.info.election (with `mode` and `id`) through `submit(statement) -> Reply`;
    None when election is off or the answer is not such a map."""
    try:
        reply = submit(ELECTION_STATE)
    except Exception:   # noqa: BLE001 - a table without the column, not a failure
        return None
    values = getattr(reply, "values", None)
    if reply.error is not None or not values or not isinstance(values[0], dict):
        return None
    state = values[0]
    return state if {"state", "term", "leader"} <= set(state) else None


def election_line(state: dict) -> Text:
    """One line over the table: the term, who leads, what this instance is."""
    leader = state.get("leader")
    line = Text("election: ", style="dim")
    line.append(f"term {_plain(state.get('term'))}, ")
    if leader:
        line.append(f"leader {_plain(leader)}", style="bold green")
    else:
        line.append("no leader", style="bold red")
    me = state.get("id")
    line.append(f"; this instance (id {_plain(me)}): {_plain(state.get('state'))}")
    vote = state.get("vote")
    if vote:
        line.append(f", voted for {_plain(vote)}")
    line.append(f" ({_plain(state.get('mode'))})", style="dim")
    return line


def _role(replica_id: Any, election: dict) -> Text:
    """leader on the leader's row, this instance's state on its own row."""
    if replica_id == election.get("leader"):
        return Text(f"leader, term {_plain(election.get('term'))}", style="bold green")
    if replica_id == election.get("id"):
        state = _plain(election.get("state"))
        return Text(state, style="yellow" if state == "candidate" else "")
    return Text("")


def _side_cells(side: dict | None) -> tuple[Text, str, str]:
    """(status, lag, idle) of an upstream or a downstream; a dash where there is no
    such link (an instance's own row has neither)."""
    if side is None:
        return Text("-", style="dim"), "", ""
    status = side.get("status")
    text = Text(_plain(status), style=status_style(status)) if status is not None \
        else Text("")
    return text, format_seconds(side.get("lag")), format_seconds(side.get("idle"))


def _message(upstream: dict | None, downstream: dict | None) -> Text:
    """Errors of the links; each side is named only when both have something to say."""
    parts = []
    for name, side in (("upstream", upstream), ("downstream", downstream)):
        if not side:
            continue
        text = _plain(side.get("message")) if side.get("message") is not None else ""
        system = side.get("system_message")
        if system is not None and _plain(system) not in text:
            text = f"{text} ({_plain(system)})" if text else _plain(system)
        if text:
            parts.append((name, text, status_style(side.get("status"))))
    message = Text()
    for index, (name, text, style) in enumerate(parts):
        if index:
            message.append("; ")
        if len(parts) > 1:
            message.append(name + ": ", style="dim")
        message.append(text, style="red" if "red" in style else "")
    return message


def format_seconds(value: Any) -> str:
    """Lag and idle as a person reads them: 0.5 ms, 1.25 s, 3m07s."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _plain(value)
    if value < 0:
        return f"{value:.3g} s"
    if value < 1:
        return f"{value * 1000:.1f} ms"
    if value < 60:
        return f"{value:.2f} s"
    if value < 3600:
        return f"{int(value // 60)}m{int(value % 60):02d}s"
    return f"{int(value // 3600)}h{int(value % 3600 // 60):02d}m"


def _short_uuid(value: Any) -> str:
    text = _plain(value)
    return text[:SHORT_UUID] if len(text) > SHORT_UUID else text


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)
