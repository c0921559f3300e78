"""Vector clock: replica id (0..31) -> LSN, as Tarantool 2.6 keeps it.

Component 0 counts rows of replica-local (GROUP_LOCAL) spaces; it takes part in
the signature (and so in file names) but is never sent over the wire.

A component can be *present with LSN 0* (it was parsed from `{1: 0}`); that keeps
the text form of a file header round-trippable, while comparisons, equality and
the wire form treat a zero component like an absent one, as Tarantool does.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

from spindle.core.iproto.errors import ClientError, ErrorCode

VCLOCK_MAX = 32
# 1 + VCLOCK_MAX * len("NN: " + 20 digits + ", ") + 1, as in vclock.h; header
# parsers refuse longer VClock values.
VCLOCK_STR_LEN_MAX = 1 + VCLOCK_MAX * (2 + 2 + 20 + 2) + 1
INT64_MAX = (1 << 63) - 1


class VClockParseError(ValueError):
    """Bad vclock text; `offset` is 1-based like vclock_from_string()'s result."""

    def __init__(self, text: str, offset: int):
        super().__init__(f"invalid vclock at offset {offset}: {text!r}")
        self.text = text
        self.offset = offset


def _check_id(replica_id: int) -> int:
    if not 0 <= replica_id < VCLOCK_MAX:
        raise ValueError(f"replica id {replica_id} is out of range 0..{VCLOCK_MAX - 1}")
    return replica_id


class VClock:
    """Mutable vector clock. Iteration yields (replica_id, lsn) in ascending id."""

    __slots__ = ("_lsn",)

    def __init__(self, components: Mapping[int, int] | VClock | None = None):
        self._lsn: dict[int, int] = {}
        if components is not None:
            for replica_id, lsn in sorted(_as_dict(components).items()):
                _check_id(int(replica_id))
                if lsn < 0:
                    raise ValueError(f"negative lsn {lsn} for replica {replica_id}")
                self._lsn[int(replica_id)] = int(lsn)

    # -- access ---------------------------------------------------------------

    def get(self, replica_id: int, default: int = 0) -> int:
        return self._lsn.get(replica_id, default)

    __getitem__ = get

    def __contains__(self, replica_id: object) -> bool:
        return replica_id in self._lsn

    def items(self) -> Iterator[tuple[int, int]]:
        return iter(sorted(self._lsn.items()))

    __iter__ = items

    def __len__(self) -> int:
        return len(self._lsn)

    @property
    def signature(self) -> int:
        """Sum of all components (component 0 included): names .xlog/.snap files."""
        return sum(self._lsn.values())

    sum = signature

    # -- mutation -------------------------------------------------------------

    def follow(self, replica_id: int, lsn: int) -> int:
        """Advance one component; returns the previous LSN.

        Going backwards (or standing still) means a row would be applied twice
        or out of order, so it is refused with ER_INVALID_ORDER.
        """
        _check_id(replica_id)
        prev = self._lsn.get(replica_id, 0)
        if lsn <= prev:
            raise ClientError(ErrorCode.ER_INVALID_ORDER, replica_id, prev, lsn)
        self._lsn[replica_id] = lsn
        return prev

    def inc(self, replica_id: int) -> int:
        """Bump one component by one and return the new LSN (the WAL assigns LSNs so)."""
        _check_id(replica_id)
        lsn = self._lsn.get(replica_id, 0) + 1
        self._lsn[replica_id] = lsn
        return lsn

    def reset(self, replica_id: int, lsn: int) -> None:
        """Set a component to any value; 0 removes it (vclock_reset)."""
        _check_id(replica_id)
        if lsn < 0:
            raise ValueError(f"negative lsn {lsn}")
        if lsn == 0:
            self._lsn.pop(replica_id, None)
        else:
            self._lsn[replica_id] = lsn

    def merge(self, other: VClock | Mapping[int, int]) -> VClock:
        """Component-wise maximum, in place; returns self."""
        for replica_id, lsn in _as_dict(other).items():
            if lsn > self._lsn.get(replica_id, 0):
                self._lsn[_check_id(replica_id)] = lsn
        return self

    def min_ignore0(self, other: VClock | Mapping[int, int]) -> VClock:
        """Component-wise minimum except component 0, in place (GC uses it)."""
        theirs_all = _as_dict(other)
        for replica_id in set(self._lsn) | set(theirs_all):
            if replica_id == 0:
                continue
            mine, theirs = self.get(replica_id), theirs_all.get(replica_id, 0)
            if mine > theirs:
                self.reset(replica_id, theirs)
        return self

    def clear(self) -> None:
        self._lsn.clear()

    # -- comparison -----------------------------------------------------------

    def compare(self, other: VClock | Mapping[int, int], ignore0: bool = False) -> int | None:
        """Partial order: -1 (self < other), 0, 1, or None when incomparable."""
        theirs = _as_dict(other)
        le = ge = True
        for replica_id in set(self._lsn) | set(theirs):
            if ignore0 and replica_id == 0:
                continue
            a, b = self._lsn.get(replica_id, 0), theirs.get(replica_id, 0)
            le = le and a <= b
            ge = ge and a >= b
            if not le and not ge:
                return None
        if ge and not le:
            return 1
        if le and not ge:
            return -1
        return 0

    def lex_compare(self, other: VClock) -> int:
        """Total order by ascending replica id: sorts files whose vclocks are incomparable."""
        for replica_id in sorted(set(self._lsn) | set(other._lsn)):
            a, b = self.get(replica_id), other.get(replica_id)
            if a != b:
                return -1 if a < b else 1
        return 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, VClock):
            return self.compare(other) == 0
        if isinstance(other, Mapping):
            return self.compare(VClock(other)) == 0
        return NotImplemented

    def __le__(self, other: VClock) -> bool:
        return self.compare(other) in (-1, 0)

    def __lt__(self, other: VClock) -> bool:
        return self.compare(other) == -1

    def __ge__(self, other: VClock) -> bool:
        return self.compare(other) in (1, 0)

    def __gt__(self, other: VClock) -> bool:
        return self.compare(other) == 1

    # No __hash__: a vclock is mutable (Python sets __hash__ to None for a class
    # that defines __eq__ alone; mypy does not let it be assigned None explicitly).

    # -- copies and forms -----------------------------------------------------

    def copy(self) -> VClock:
        clone = _new_vclock(VClock)     # no __init__: the WAL copies one per commit
        clone._lsn = self._lsn.copy()
        return clone

    __copy__ = copy

    @staticmethod
    def max(*clocks: VClock | Mapping[int, int]) -> VClock:
        result = VClock()
        for clock in clocks:
            result.merge(clock)
        return result

    def to_dict(self) -> dict[int, int]:
        """Every present component, ascending id (component 0 included)."""
        return dict(sorted(self._lsn.items()))

    def to_wire(self) -> dict[int, int]:
        """The IPROTO VCLOCK map: component 0 and zero LSNs are never sent."""
        return {i: lsn for i, lsn in sorted(self._lsn.items()) if i != 0 and lsn != 0}

    @classmethod
    def from_wire(cls, components: Mapping[int, int]) -> VClock:
        """Decode a VCLOCK map like 2.6.0 does: ids >= 32 are an error, id 0 and lsn 0 ignored."""
        clock = cls()
        for replica_id, lsn in components.items():
            if (not isinstance(replica_id, int) or not isinstance(lsn, int)
                    or isinstance(replica_id, bool) or isinstance(lsn, bool)
                    or replica_id < 0 or lsn < 0):
                raise ValueError(f"bad vclock component {replica_id!r}: {lsn!r}")
            _check_id(replica_id)
            if replica_id != 0 and lsn != 0:
                clock._lsn[replica_id] = lsn
        return clock

    def __str__(self) -> str:
        """`{1: 25, 2: 3}` -- the xlog header form, also what box.info prints."""
        return "{" + ", ".join(f"{i}: {lsn}" for i, lsn in sorted(self._lsn.items())) + "}"

    def __repr__(self) -> str:
        return f"VClock({self})"

    def to_lua(self) -> str:
        """A Lua table constructor with the same content: `{[1] = 25, [2] = 3}`."""
        return "{" + ", ".join(f"[{i}] = {lsn}" for i, lsn in sorted(self._lsn.items())) + "}"

    @classmethod
    def from_string(cls, text: str) -> VClock:
        """Parse the header form with vclock_from_string()'s tolerance for blanks.

        Duplicate ids, ids >= 32, negative or >int64 LSNs and trailing junk are
        refused; the error offset is 1-based like Tarantool's.
        """
        clock = cls()
        n = len(text)
        pos = 0

        def fail() -> VClockParseError:
            return VClockParseError(text, pos + 1)

        def skip_blank(p: int, spaces: str = " \t") -> int:
            while p < n and text[p] in spaces:
                p += 1
            return p

        pos = skip_blank(pos)
        if pos >= n or text[pos] != "{":
            raise fail()
        pos += 1
        expect_key = True
        while True:
            pos = skip_blank(pos)
            if pos >= n:
                raise fail()
            ch = text[pos]
            if expect_key and ch == "}":
                pos += 1
                break
            if not expect_key:
                # vclock_from_string allows any whitespace before ',' or '}'
                pos = skip_blank(pos, " \t\n\r\v\f")
                if pos < n and text[pos] == "}":
                    pos += 1
                    break
                if pos < n and text[pos] == ",":
                    pos += 1
                    expect_key = True
                    continue
                raise fail()
            start = pos
            while pos < n and text[pos].isdigit() and text[pos].isascii():
                pos += 1
            if start == pos:
                raise fail()
            replica_id = int(text[start:pos])
            if replica_id >= VCLOCK_MAX:
                raise fail()
            pos = skip_blank(pos)
            if pos >= n or text[pos] != ":":
                raise fail()
            pos = skip_blank(pos + 1)
            start = pos
            while pos < n and text[pos].isdigit() and text[pos].isascii():
                pos += 1
            if start == pos:
                raise fail()
            lsn = int(text[start:pos])
            if lsn > INT64_MAX or clock.get(replica_id) > 0:
                raise fail()
            clock._lsn[replica_id] = lsn
            expect_key = False
        pos = skip_blank(pos)
        if pos != n:
            raise fail()
        return clock


_new_vclock = object.__new__


def _as_dict(clock: VClock | Mapping[int, int]) -> Mapping[int, int]:
    return clock._lsn if isinstance(clock, VClock) else clock
