"""`box.info.replication` under `\\set output table`: one coloured row per peer.

The value is recognised by its shape (a map id -> peer, or an array of peers, where
each peer is a map with id, uuid and lsn and at most the other keys 2.6.0 shows), so
the same table appears for `box.info.replication`, a `\\watch` of it, or a copy of it
kept in a variable. Statuses are Tarantool's applier/relay strings: `follow` is the
healthy steady state (green); `stopped` and `disconnected` need a human (red);
everything else is a link on its way somewhere (yellow).
"""
from __future__ import annotations

from typing import Any

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


def replication_table(peers: list[dict]) -> Table:
    table = Table(box=box.SQUARE, header_style="bold", show_lines=False)
    for name in COLUMNS:
        justify = "right" if name in ("id", "lsn") or name.endswith(("lag", "idle")) \
            else "left"
        table.add_column(name, justify=justify, overflow="fold",
                         no_wrap=name != "message")
    for peer in peers:
        upstream = peer.get("upstream")
        downstream = peer.get("downstream")
        table.add_row(_plain(peer.get("id")), _short_uuid(peer.get("uuid")),
                      _plain(peer.get("lsn")),
                      *_side_cells(upstream), *_side_cells(downstream),
                      _message(upstream, downstream))
    return table


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
