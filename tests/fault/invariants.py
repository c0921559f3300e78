"""What must hold on a replica set once every fault is healed.

`check(nodes, ...)` first waits (with a deadline) until the vclocks of all nodes are
equal and every upstream follows (failing at once if one is `stopped`), then looks:

* data: every user space has the same tuples on every node;
* upstreams: none is `stopped` (box.info.replication[*].upstream.status);
* acknowledged writes: every key the clients saw acknowledged is on every node;
* LSNs: for every node's own rows (replica id = its id) in its xlogs, every other
  node's xlogs hold the same (replica id, LSN) rows with the same type and body, and
  none that the author lacks — above the other node's snapshot, which holds what it
  got by JOIN. An LSN hole here, with equal vclocks, is what issue 21 looked like: a
  relay skipped rows and the replica's vclock caught up anyway.

With leader election (`allow_tails`), one thing is let through, as 2.6.3 has it:
a leader killed with -9 may have rows in its WAL that no other node got (written,
not yet relayed). Started again it is a follower, and its followers drop the data
of a node that does not lead (2.6.3's applier); the new leader's PROMOTE has rolled
those rows back on it. Its own vclock component stays ahead of the others' (a 2.6.3
node's upstream from it stays `sync`; a Spindle's follows, see applier_check_sync)
until it leads again, when its relay resends them and the others log them as NOPs
of an outdated term. Such a *deposed tail* is reported, not
counted as a problem, when: only its author is ahead in its own component, every
other component is equal, none of its rows' keys is on any node (they were rolled
back), and none was acknowledged.

The result is a `Report`: counts for the reliability table and the problems as text
for the test's assertion.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import msgpack

from spindle.core.vclock import VClock
from spindle.core.xlog.files import XlogReader, list_files, read_meta

from ..integration.cluster import Node, wait_for
from .known_bugs import GH_5185, explained_by_gh_5185, gh_5185_rows

CONVERGE_TIMEOUT = 120.0
PAGE = 20_000
SHOWN = 10            # keys or LSNs quoted per problem

_PAGE_LUA = """
local name, after, limit = ...
local space = box.space[name]
if after == nil then return space:select({}, {limit = limit}) end
return space:select({after}, {iterator = 'GT', limit = limit})
"""
_USER_SPACES_LUA = """
local names = {}
for _, s in box.space._space:pairs({512}, {iterator = 'GE'}) do
    if box.space[s[3]] ~= nil and box.space[s[3]].index[0] ~= nil then
        table.insert(names, s[3])
    end
end
table.sort(names)
return names
"""
_UPSTREAMS_LUA = """
local out = {}
for id, r in pairs(box.info.replication) do
    if r.upstream ~= nil then
        table.insert(out, {id, r.upstream.status, r.upstream.message or box.NULL})
    end
end
return out
"""


@dataclass
class Report:
    nodes: list[str]
    acked: int = 0
    missing: dict[str, int] = field(default_factory=dict)      # acknowledged keys absent
    holes: dict[str, int] = field(default_factory=dict)        # LSNs absent from xlogs
    stopped: int = 0                                           # upstreams `stopped`
    tails: dict[str, tuple[int, int]] = field(default_factory=dict)  # deposed tails:
                                                               # LSNs (after, last)
    nopped: dict[str, list[int]] = field(default_factory=dict)   # tails resent: LSNs
    known: dict[str, int] = field(default_factory=dict)        # keys put down to a bug
    problems: list[str] = field(default_factory=list)          # of 2.6.0 (known_bugs.py)

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        known = "".join(f"\n(differences put down to {bug}: {count} keys)"
                        for bug, count in self.known.items())
        tails = "".join(f"\n(a deposed leader's tail on {name}: its LSNs "
                        f"{_ranges(list(range(a + 1, b + 1)))}, rolled back)"
                        for name, (a, b) in self.tails.items())
        tails += "".join(f"\n(a deposed leader's tail from {name} resent, NOPs on the "
                         f"others: its LSNs {_ranges(lsns)})"
                         for name, lsns in self.nopped.items())
        return ("\n".join(self.problems) if self.problems else "all invariants hold") + known \
            + tails


# ------------------------------------------------------------------ waiting

def upstreams(node: Node) -> list[tuple[int, str, str | None]]:
    return [tuple(row) for row in node.eval(_UPSTREAMS_LUA)]


class StoppedUpstream(AssertionError):
    pass


def deposed_tails(ids: list[int], clocks: list[dict[int, int]]
                  ) -> dict[int, tuple[int, int]] | None:
    """{index of a node: (the others' LSN, its own)} for every node ahead of all
    the others in its own component only, the others agreeing on it; None when
    the vclocks differ in any other way."""
    tails = {}
    for component in set().union(*clocks):
        values = [clock.get(component, 0) for clock in clocks]
        if len(set(values)) == 1:
            continue
        if component not in ids:
            return None
        author = ids.index(component)
        others = {value for i, value in enumerate(values) if i != author}
        if len(others) != 1 or values[author] < max(others):
            return None
        tails[author] = (others.pop(), values[author])
    return tails


def converge(nodes: list[Node], timeout: float = CONVERGE_TIMEOUT,
             allow_tails: bool = False) -> dict[int, tuple[int, int]]:
    """Until all vclocks are equal and every upstream follows; an upstream that is
    `stopped` ends the wait at once (nothing restarts it by itself). With
    `allow_tails`, a deposed leader's tail (the module's docstring) may stay, and
    the upstreams from its author `sync`: returns them by the author's index."""
    ids = [node.info("id") for node in nodes] if allow_tails else []
    found: dict[int, tuple[int, int]] = {}

    def settled():
        clocks = [node.vclock() for node in nodes]
        tails = deposed_tails(ids, clocks) if allow_tails else {}
        authors = {ids[i] for i in tails or {}}
        for node in nodes:
            for peer, status, message in upstreams(node):
                if status == "stopped":
                    return f"{node.name}: upstream {peer} stopped: {message}"
                if status != "follow" and not (status == "sync" and peer in authors):
                    return False
        if tails is None or (not allow_tails and any(c != clocks[0] for c in clocks)):
            return False
        found.clear()
        found.update(tails)
        return "settled"

    try:
        result = wait_for(settled, timeout, "equal vclocks and every upstream following")
    except AssertionError as exc:
        state = "; ".join(f"{node.name} vclock {node.vclock()} upstreams {upstreams(node)}"
                          for node in nodes)
        raise AssertionError(f"{exc}: {state}") from None
    if result != "settled":
        raise StoppedUpstream(result)
    return found


# ---------------------------------------------------------------------- data

def rows_of(node: Node, space: str) -> list[tuple]:
    """All tuples of a space, by pages in primary-key order (unsigned keys)."""
    rows: list[tuple] = []
    after = None
    while True:
        page = node.eval(_PAGE_LUA, space, after, PAGE) or []
        rows.extend(tuple(row) for row in page)
        if len(page) < PAGE:
            return rows
        after = page[-1][0]


def user_spaces(node: Node) -> list[str]:
    return list(node.eval(_USER_SPACES_LUA) or [])


# ---------------------------------------------------------------------- xlogs

def xlog_rows(workdir: Path) -> tuple[dict[tuple[int, int], tuple], list[str]]:
    """{(replica id, lsn): (type, body)} of every readable row in the node's xlogs
    (a torn tail ends a file; a corrupt block — a flipped byte — is skipped, as with
    force_recovery), and the conflicts: one (replica id, LSN) with two contents."""
    rows: dict[tuple[int, int], tuple] = {}
    conflicts: list[str] = []
    for entry in list_files(str(workdir), ".xlog"):
        with XlogReader(entry.path, force_recovery=True) as reader:
            for row in reader.rows():
                if row.replica_id == 0:          # local rows are not replicated
                    continue
                body = (msgpack.unpackb(row.body, raw=True, strict_map_key=False)
                        if row.body else None)
                key = (row.replica_id, row.lsn)
                content = (row.type, _hashable(body))
                if key in rows and rows[key] != content:
                    conflicts.append(f"{Path(entry.path).name}: {key} written twice, "
                                     "with different contents")
                rows[key] = content
    return rows, conflicts


def _hashable(value):
    if isinstance(value, dict):
        return tuple(sorted(((_hashable(k), _hashable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def snapshot_vclock(workdir: Path) -> VClock:
    """The newest snapshot's vclock: rows up to it came by JOIN, not by the xlogs."""
    snaps = list_files(str(workdir), ".snap")
    return read_meta(snaps[-1].path).vclock if snaps else VClock()


def _ranges(lsns: list[int]) -> str:
    """LSNs as compact ranges: 12-15, 19."""
    out, start, prev = [], None, None
    for lsn in sorted(lsns):
        if start is None:
            start = prev = lsn
        elif lsn == prev + 1:
            prev = lsn
        else:
            out.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = lsn
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(out[:SHOWN]) + (" ..." if len(out) > SHOWN else "")


def lsn_problems(logs: dict[str, tuple[int, Path]], tails: dict[str, tuple[int, int]]
                 | None = None, nopped: list[tuple[str, int]] | None = None
                 ) -> tuple[list[str], dict[str, int]]:
    """Compare the xlogs of nodes {name: (instance id, data dir)}: for each author, its
    own rows against every other node's rows of its id, above both snapshots (and
    below its deposed tail, `tails` by the author's name). Returns the problems and,
    per node, how many of the authors' LSNs its xlogs lack. With `nopped` (a list
    to fill), a row another node logged as a NOP is not a difference but goes
    there as (author, LSN): a deposed tail resent once its author led again, which
    the others' filter of outdated terms turned into NOPs."""
    problems: list[str] = []
    holes = {name: 0 for name in logs}
    rows, bounds = {}, {}
    for name, (_, workdir) in logs.items():
        rows[name], conflicts = xlog_rows(workdir)
        bounds[name] = snapshot_vclock(workdir)
        problems.extend(f"{name}: {text}" for text in conflicts)
    for author, (rid, _) in logs.items():
        ceiling = (tails or {}).get(author, (None, None))[0]
        own = {key: content for key, content in rows[author].items() if key[0] == rid
               and (ceiling is None or key[1] <= ceiling)}
        for name in logs:
            if name == author:
                continue
            floor = max(bounds[name].get(rid), bounds[author].get(rid))
            theirs = {key: content for key, content in rows[name].items()
                      if key[0] == rid and key[1] > floor}
            mine = {key: content for key, content in own.items() if key[1] > floor}
            absent = sorted(key[1] for key in mine.keys() - theirs.keys())
            extra = sorted(key[1] for key in theirs.keys() - mine.keys())
            differ = sorted(key[1] for key in mine.keys() & theirs.keys()
                            if mine[key] != theirs[key])
            if nopped is not None:
                nops = [lsn for lsn in differ if theirs[(rid, lsn)][0] == _NOP]
                nopped.extend((author, lsn) for lsn in nops)
                differ = [lsn for lsn in differ if lsn not in nops]
            holes[name] += len(absent)
            if absent:
                problems.append(f"{name}: {len(absent)} LSNs of {author} (id {rid}) missing "
                                f"from its xlogs: {_ranges(absent)}")
            if extra:
                problems.append(f"{name}: {len(extra)} rows of id {rid} that {author} never "
                                f"wrote: LSN {_ranges(extra)}")
            if differ:
                problems.append(f"{name}: {len(differ)} rows of id {rid} differ from "
                                f"{author}'s: LSN {_ranges(differ)}")
    return problems, holes


def check_lsns(nodes: list[Node], report: Report, nopped: list | None = None) -> None:
    problems, holes = lsn_problems({node.name: (node.info("id"), node.workdir)
                                    for node in nodes}, report.tails, nopped)
    report.problems.extend(problems)
    for name, count in holes.items():
        report.holes[name] = report.holes.get(name, 0) + count


# -------------------------------------------------------------------- check

def check(nodes: list[Node], acked: dict[str, set] | None = None,
          timeout: float = CONVERGE_TIMEOUT, reference_bugs: bool = False,
          allow_tails: bool = False) -> Report:
    """Wait for convergence, then every invariant; `acked` maps a space to the keys
    clients saw acknowledged in it. nodes[0] is the master (the one the others are
    compared with). `reference_bugs`: nodes[0] is Tarantool 2.6.0, whose known bugs
    (known_bugs.py) are counted apart instead of failing the data comparison.
    `allow_tails`: election runs, a deposed leader's tail is let through (the
    module's docstring) once its rows are seen rolled back."""
    report = Report([node.name for node in nodes])
    try:
        tails = converge(nodes, timeout, allow_tails)
        report.tails = {nodes[i].name: tail for i, tail in tails.items()}
    except StoppedUpstream:
        pass                       # each stopped upstream is reported below
    except AssertionError as exc:
        report.problems.append(f"no convergence: {exc}")
    for node in nodes:
        for peer, status, message in upstreams(node):
            if status == "stopped":
                report.stopped += 1
                report.problems.append(f"{node.name}: upstream {peer} stopped: {message}")
    spaces = user_spaces(nodes[0])
    for node in nodes[1:]:
        if user_spaces(node) != spaces:
            report.problems.append(f"{node.name}: spaces {user_spaces(node)} != {spaces}")
    pattern = (gh_5185_rows(nodes[0].workdir, nodes[0].info("id")) if reference_bugs
               else None)
    for space in spaces:
        contents = {node.name: rows_of(node, space) for node in nodes}
        space_id = nodes[0].eval("return box.space[...].id", space)
        compare_space(report, nodes, space, space_id, contents, pattern)
        for name, keys in (acked or {}).items():
            if name != space:
                continue
            report.acked += len(keys)
            for node in nodes:
                present = {row[0] for row in contents[node.name]}
                lost = keys - present
                report.missing[node.name] = report.missing.get(node.name, 0) + len(lost)
                if lost:
                    report.problems.append(
                        f"space {space}: {node.name} lost {len(lost)} acknowledged keys: "
                        f"{sorted(lost)[:SHOWN]}")
    nopped: list[tuple[str, int]] | None = [] if allow_tails else None
    check_lsns(nodes, report, nopped)
    for author, lsn in sorted(set(nopped or [])):
        report.nopped.setdefault(author, []).append(lsn)
    check_tails(nodes, report, acked or {})
    return report


def tail_keys(workdir: Path, rid: int, lsns: Callable[[int], bool]) -> dict[int, set]:
    """{space id: first fields} of the data rows of `rid` whose LSN is one of
    `lsns` in a node's xlogs."""
    keys: dict[int, set] = {}
    for entry in list_files(str(workdir), ".xlog"):
        with XlogReader(entry.path, force_recovery=True) as reader:
            for row in reader.rows():
                if row.replica_id != rid or not lsns(row.lsn) or not row.body:
                    continue
                body = msgpack.unpackb(row.body, raw=False, strict_map_key=False)
                if isinstance(body, dict) and _SPACE_ID in body and body.get(_TUPLE):
                    keys.setdefault(body[_SPACE_ID], set()).add(body[_TUPLE][0])
    return keys


_SPACE_ID, _TUPLE = 0x10, 0x21
_NOP = 12                  # IPROTO_NOP


def check_tails(nodes: list[Node], report: Report, acked: dict[str, set]) -> None:
    """A deposed tail's rows must be rolled back: their keys on no node, none of
    them acknowledged."""
    by_name = {node.name: node for node in nodes}
    rows: list[tuple[str, Callable[[int], bool]]] = [
        (name, lambda lsn, after=after, last=last: after < lsn <= last)
        for name, (after, last) in report.tails.items()]
    rows += [(name, set(lsns).__contains__) for name, lsns in report.nopped.items()]
    for name, lsns in rows:
        author = by_name[name]
        for space_id, keys in tail_keys(author.workdir, author.info("id"), lsns).items():
            space = author.eval("local s = box.space[...] return s and s.name", space_id)
            if space in acked and keys & acked[space]:
                report.problems.append(f"{name}: acknowledged keys in its deposed tail: "
                                       f"{sorted(keys & acked[space])[:SHOWN]}")
            for node in nodes:
                present = [key for key in sorted(keys) if node.eval(
                    "return box.space[...]:get{select(2, ...)} ~= nil", space_id, key)]
                if present:
                    report.problems.append(f"{node.name}: keys of {name}'s deposed tail "
                                           f"not rolled back: {present[:SHOWN]}")


def compare_space(report: Report, nodes: list[Node], space: str, space_id: int,
                  contents: dict[str, list[tuple]], pattern: dict | None) -> None:
    """Every node's tuples against the master's (nodes[0]), key by key."""
    master = {row[0]: row for row in contents[nodes[0].name]}
    for node in nodes[1:]:
        mine = {row[0]: row for row in contents[node.name]}
        lacks, extra = [], []
        for key in master.keys() | mine.keys():
            theirs, ours = master.get(key), mine.get(key)
            if theirs == ours:
                continue
            if pattern is not None and explained_by_gh_5185(pattern, space_id, key,
                                                             theirs, ours):
                report.known[GH_5185] = report.known.get(GH_5185, 0) + 1
                continue
            if theirs is not None:
                lacks.append(theirs)
            if ours is not None:
                extra.append(ours)
        if lacks or extra:
            report.problems.append(
                f"space {space}: {node.name} lacks {len(lacks)} and has {len(extra)} "
                f"other tuples against {nodes[0].name}: {sorted(lacks)[:SHOWN]} / "
                f"{sorted(extra)[:SHOWN]}")
