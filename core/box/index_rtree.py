"""memtx's RTREE index (memtx_rtree.c of 2.6.0) on an R-tree shaped as 2.6.0's.

One array part, non-unique, `dimension` (2..20) numbers for a point or twice that for
a box, `distance` euclid or manhattan. Iterators ALL, EQ (the same box),
GE/GT (the entry contains the key's box, strictly), LE/LT (the entry lies inside it,
strictly), OVERLAPS, NEIGHBOR (nearest first to the key's first corner).

2.6.0 returns every iteration but NEIGHBOR in the order of its R-tree's pages, and
breaks NEIGHBOR's ties by the tree too, so the tree here grows and shrinks as 2.6.0's
(salad/rtree.c) does, for the same results in the same order:

* pages hold up to `max_fill` branches: what 18 branches of `dimension` doubles (and
  a pointer) round up to, in a power-of-two page; a page under `min_fill` (2/5 of it)
  after a delete leaves the tree and its branches go in again;
* an insert goes down into the branch whose box grows least (ties: the smaller box)
  and appends to the leaf; a full page splits along the axis with the smallest sum
  of half-margins over the allowed cuts, at the cut with the least overlap (then the
  least area); the lower part moves to a new page appended to the parent;
* a replace puts the new tuple in before it takes the old one out (as 2.6.0's does).

Boxes are flat lists [lo0, hi0, lo1, hi1, ...]. (Multikey TREE indexes:
index_multikey.py. BITSET: index_bitset.py.)
"""
from __future__ import annotations

import heapq
from operator import eq
from typing import Any, Callable, Iterator

from spindle.core.box.field_types import FieldType
from spindle.core.box.index import Index, IndexType
from spindle.core.box.index_bitset import stored_tuple
from spindle.core.iproto.constants import IteratorType as It
from spindle.core.iproto.errors import ClientError, ErrorCode

def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- boxes: q is the search key's box, r an entry's or a page's --------------------

def _always(q: list, r: list) -> bool:
    return True


def _q_in_r(q: list, r: list) -> bool:
    for i in range(0, len(q), 2):
        if q[i] < r[i] or q[i + 1] > r[i + 1]:
            return False
    return True


def _q_strictly_in_r(q: list, r: list) -> bool:
    for i in range(0, len(q), 2):
        if q[i] <= r[i] or q[i + 1] >= r[i + 1]:
            return False
    return True


def _r_in_q(q: list, r: list) -> bool:
    return _q_in_r(r, q)


def _r_strictly_in_q(q: list, r: list) -> bool:
    return _q_strictly_in_r(r, q)


def _overlaps(q: list, r: list) -> bool:
    for i in range(0, len(q), 2):
        if r[i] > q[i + 1] or r[i + 1] < q[i]:
            return False
    return True


def _equals(q: list, r: list) -> bool:
    return all(map(eq, q, r))       # (exact, as 2.6.0's; NaN equals nothing)


# iterator -> (test of a page's box, test of an entry's box): a page can hold a match
# only if its box passes the first
_SEARCH: dict = {
    It.ALL: (_always, _always),
    It.EQ: (_q_in_r, _equals),
    It.GE: (_q_in_r, _q_in_r),
    It.GT: (_q_strictly_in_r, _q_strictly_in_r),
    It.OVERLAPS: (_overlaps, _overlaps),
    It.LE: (_overlaps, _r_in_q),
    It.LT: (_overlaps, _r_strictly_in_q),
}


# The same tests written out for 2 axes, the usual case (they take a third of the
# time of the loops). Each says what the loop says, comparisons with NaN included.

def _q_in_r_2(q: list, r: list) -> bool:
    return not (q[0] < r[0] or q[1] > r[1] or q[2] < r[2] or q[3] > r[3])


def _q_strictly_in_r_2(q: list, r: list) -> bool:
    return not (q[0] <= r[0] or q[1] >= r[1] or q[2] <= r[2] or q[3] >= r[3])


def _r_in_q_2(q: list, r: list) -> bool:
    return not (r[0] < q[0] or r[1] > q[1] or r[2] < q[2] or r[3] > q[3])


def _r_strictly_in_q_2(q: list, r: list) -> bool:
    return not (r[0] <= q[0] or r[1] >= q[1] or r[2] <= q[2] or r[3] >= q[3])


def _overlaps_2(q: list, r: list) -> bool:
    return not (r[0] > q[1] or r[1] < q[0] or r[2] > q[3] or r[3] < q[2])


_SEARCH_2: dict = {
    It.ALL: (_always, _always),
    It.EQ: (_q_in_r_2, _equals),
    It.GE: (_q_in_r_2, _q_in_r_2),
    It.GT: (_q_strictly_in_r_2, _q_strictly_in_r_2),
    It.OVERLAPS: (_overlaps_2, _overlaps_2),
    It.LE: (_overlaps_2, _r_in_q_2),
    It.LT: (_overlaps_2, _r_strictly_in_q_2),
}


def _add(to: list, box: list) -> None:
    """Grow `to` to cover `box`."""
    for i in range(0, len(to), 2):
        if to[i] > box[i]:
            to[i] = box[i]
        if to[i + 1] < box[i + 1]:
            to[i + 1] = box[i + 1]


def _add_2(to: list, box: list) -> None:
    if to[0] > box[0]:
        to[0] = box[0]
    if to[1] < box[1]:
        to[1] = box[1]
    if to[2] > box[2]:
        to[2] = box[2]
    if to[3] < box[3]:
        to[3] = box[3]


# (the 2-axis forms of RTree._growth_any and RTree._distance_any)

def _growth_2(p: list, b: list) -> tuple:
    area = (p[3] - p[2]) * (p[1] - p[0])
    grown = (((p[3] if p[3] > b[3] else b[3]) - (p[2] if p[2] < b[2] else b[2])) *
             ((p[1] if p[1] > b[1] else b[1]) - (p[0] if p[0] < b[0] else b[0])))
    return grown - area, area


def _euclid_2(box: list, point: list) -> float:
    total = 0.0
    p = point[2]
    if p < box[2]:
        total += (box[2] - p) * (box[2] - p)
    elif p > box[3]:
        total += (p - box[3]) * (p - box[3])
    p = point[0]
    if p < box[0]:
        total += (box[0] - p) * (box[0] - p)
    elif p > box[1]:
        total += (p - box[1]) * (p - box[1])
    return total


def _manhattan_2(box: list, point: list) -> float:
    total = 0.0
    p = point[2]
    if p < box[2]:
        total += box[2] - p
    elif p > box[3]:
        total += p - box[3]
    p = point[0]
    if p < box[0]:
        total += box[0] - p
    elif p > box[1]:
        total += p - box[1]
    return total


def _page_cover(page: list, add: Callable = _add) -> list:
    """The box of a page: what covers its branches' boxes."""
    out = list(page[0][0])
    for branch in page[1:]:
        add(out, branch[0])
    return out


class RTree:
    """The R-tree: a page is a list of branches [box, child], a child being a page or
    (in a leaf) a tuple; `height` counts the levels of pages (0: empty)."""

    def __init__(self, dimension: int, manhattan: bool):
        self.dimension = dimension
        self.manhattan = manhattan
        branch = 8 + 16 * dimension               # a pointer and 2 doubles per axis
        page = 1 << (18 * branch + 4 - 1).bit_length()
        self.max_fill = (page - 4) // branch
        self.min_fill = self.max_fill * 2 // 5
        # (products and sums over the axes go from the last axis, as 2.6.0's do:
        # the same rounding, the same ties)
        self._axes = [(2 * i, 2 * i + 1) for i in reversed(range(dimension))]
        two = dimension == 2
        self.tests = _SEARCH_2 if two else _SEARCH
        self._add = _add_2 if two else _add
        self._growth: Callable[[list, list], tuple] = \
            _growth_2 if two else self._growth_any
        # distance(box, point): see _distance_any
        self.distance: Callable[[list, list], float] = (
            (_manhattan_2 if manhattan else _euclid_2) if two else self._distance_any)
        self.root: list | None = None
        self.height = 0
        self.version = 0                          # moves at every change

    def _area(self, box: list) -> float:
        area = 1.0
        for lo, hi in self._axes:
            area *= box[hi] - box[lo]
        return area

    def _growth_any(self, page_box: list, box: list) -> tuple:
        """How much the area of `page_box` grows to cover `box`, and that area."""
        area = grown = 1.0
        for lo, hi in self._axes:
            low, high = page_box[lo], page_box[hi]
            area *= high - low
            grown *= ((high if high > box[hi] else box[hi]) -
                      (low if low < box[lo] else box[lo]))
        return grown - area, area

    def _cover(self, boxes: list) -> list:
        out = list(boxes[0])
        add = self._add
        for box in boxes[1:]:
            add(out, box)
        return out

    def _half_margin(self, box: list) -> float:
        margin = 0.0
        for lo, hi in self._axes:
            margin += box[hi] - box[lo]
        return margin

    # -- insertion --------------------------------------------------------------

    def insert(self, box: list, tup: Any) -> None:
        if self.root is None:
            self.root, self.height = [[box, tup]], 1
        else:
            self._insert_at(box, tup, self.height)
        self.version += 1

    def _insert_at(self, box: list, child: Any, level: int) -> None:
        """Put a branch into the page `level` levels down from the root (1: the
        root), splitting the root when it overflows."""
        old = self.root
        assert old is not None
        split = self._insert(old, box, child, level)
        if split is not None:
            self.root = [[_page_cover(old, self._add), old],
                         [_page_cover(split, self._add), split]]
            self.height += 1

    def _insert(self, page: list, box: list, child: Any, level: int) -> list | None:
        """The new page when `page` split, else None."""
        level -= 1
        if level == 0:
            return self._add_branch(page, [box, child])
        growth_of = self._growth
        best = 0
        least_growth = best_area = 0.0
        for i, branch in enumerate(page):
            growth, page_area = growth_of(branch[0], box)
            if i == 0 or growth < least_growth or (growth == least_growth and
                                                   page_area < best_area):
                best, least_growth, best_area = i, growth, page_area
        branch = page[best]
        below = branch[1]
        split = self._insert(below, box, child, level)
        if split is None:
            self._add(branch[0], box)
            return None
        branch[0] = _page_cover(below, self._add)
        return self._add_branch(page, [_page_cover(split, self._add), split])

    def _add_branch(self, page: list, branch: list) -> list | None:
        if len(page) < self.max_fill:
            page.append(branch)
            return None
        return self._split(page, branch)

    def _sort_on(self, ids: list, boxes: list, axis: int) -> None:
        """Order `ids` by their boxes' (low, high) on `axis` as 2.6.0 does: a
        selection sort in place, whose order of equal boxes is its own."""
        lo, hi = 2 * axis, 2 * axis + 1
        keys = [(boxes[j][lo], boxes[j][hi]) for j in ids]
        if len(set(keys)) == len(keys) and all(a == a and b == b for a, b in keys):
            # no equal boxes (and no NaN): every sort gives the same order
            ids.sort(key=lambda j: (boxes[j][lo], boxes[j][hi]))
            return
        n = len(ids)
        for i in range(n - 1):
            least = i
            least_lo, least_hi = boxes[ids[i]][lo], boxes[ids[i]][hi]
            for j in range(i + 1, n):
                low, high = boxes[ids[j]][lo], boxes[ids[j]][hi]
                if low < least_lo or (low == least_lo and high < least_hi):
                    least, least_lo, least_hi = j, low, high
            ids[i], ids[least] = ids[least], ids[i]

    def _split(self, page: list, branch: list) -> list:
        """Split a full page with one branch more; `page` keeps one part (in its
        order, the new branch last if it stays), the new page returned the other."""
        boxes = [branch[0]] + [b[0] for b in page]      # (0: the new branch)
        n = len(boxes)
        ids = list(range(n))
        fill = self.min_fill
        cuts = n - 2 * fill
        margin, add = self._half_margin, self._add
        best_axis, best_sum = 0, 0.0
        for axis in range(self.dimension):
            self._sort_on(ids, boxes, axis)
            forward = [0.0] * (n - fill + 1)
            backward = [0.0] * (n - fill + 1)
            box = list(boxes[ids[0]])
            forward[1] = margin(box)
            for i in range(1, n - fill):
                add(box, boxes[ids[i]])
                forward[i + 1] = margin(box)
            box = list(boxes[ids[n - 1]])
            backward[1] = margin(box)
            for i in range(1, n - fill):
                add(box, boxes[ids[n - i - 1]])
                backward[i + 1] = margin(box)
            total = 0.0
            for k in range(cuts):
                total += forward[fill + k] + backward[n - fill - k]
            if axis == 0 or total < best_sum:
                best_axis, best_sum = axis, total
        self._sort_on(ids, boxes, best_axis)
        area = self._area
        best_cut, least_overlap, least_area = 0, 0.0, 0.0
        for k in range(cuts):
            cut = fill + k
            first = self._cover([boxes[j] for j in ids[:cut]])
            second = self._cover([boxes[j] for j in ids[cut:]])
            overlap = 1.0
            for lo, hi in self._axes:
                if first[lo] > second[hi] or first[hi] < second[lo]:
                    overlap *= 0.0
                else:
                    overlap *= min(first[hi], second[hi]) - max(first[lo], second[lo])
            both = area(first) + area(second)
            if k == 0 or overlap < least_overlap or (overlap == least_overlap and
                                                     both < least_area):
                best_cut, least_overlap, least_area = k, overlap, both
        cut = fill + best_cut
        moved = set(ids[:cut])
        new_page = [branch if j == 0 else page[j - 1] for j in ids[:cut]]
        kept = [b for j, b in enumerate(page, 1) if j not in moved]
        if 0 not in moved:
            kept.append(branch)
        page[:] = kept
        return new_page

    # -- removal ----------------------------------------------------------------

    def remove(self, box: list, tup: Any) -> bool:
        if self.root is None:
            return False
        underfull: list = []              # (page, its level), the deepest first
        if not self._remove(self.root, box, tup, self.height, underfull):
            return False
        # the pages that fell under min_fill: their branches go in again, the
        # highest page first, each at its own level
        for page, level in reversed(underfull):
            for page_box, child in page:
                self._insert_at(page_box, child, self.height - level)
        root = self.root
        if len(root) == 1 and self.height > 1:
            self.root = root[0][1]
            self.height -= 1
        self.version += 1
        return True

    def _remove(self, page: list, box: list, tup: Any, level: int, underfull: list) -> bool:
        level -= 1
        if level == 0:
            for i, branch in enumerate(page):
                if branch[1] is tup:
                    del page[i]
                    return True
            return False
        for i, branch in enumerate(page):
            if not _overlaps(box, branch[0]):
                continue
            below = branch[1]
            if not self._remove(below, box, tup, level, underfull):
                continue
            if len(below) >= self.min_fill:
                branch[0] = _page_cover(below, self._add)
            else:
                underfull.append((below, level - 1))
                del page[i]
            return True
        return False

    # -- search -----------------------------------------------------------------

    def search(self, query: list, page_test: Callable, entry_test: Callable) -> Iterator[Any]:
        """The tuples whose boxes pass `entry_test(query, box)`, in the pages' order
        (depth first). Ends when the tree changes meanwhile, as 2.6.0's iterator."""
        if self.root is None:
            return
        version = self.version
        for tup in self._walk(self.root, self.height, query, page_test, entry_test):
            yield tup
            if self.version != version:
                return

    def _walk(self, page: list, level: int, query: list, page_test: Callable,
              entry_test: Callable) -> Iterator[Any]:
        if level == 1:
            for box, tup in page:
                if entry_test(query, box):
                    yield tup
            return
        for box, below in page:
            if page_test(query, box):
                yield from self._walk(below, level - 1, query, page_test, entry_test)

    def _distance_any(self, box: list, point: list) -> float:
        """2.6.0's distance from `point` (a box's first corner counts) to `box`: 0
        inside it; euclid squared, or manhattan."""
        total = 0.0
        for lo, hi in self._axes:
            p = point[lo]
            if p < box[lo]:
                gap = box[lo] - p
            elif p > box[hi]:
                gap = p - box[hi]
            else:
                continue
            total += gap if self.manhattan else gap * gap
        return total

    def neighbors(self, point: list) -> Iterator[Any]:
        """Every tuple, nearest to `point` first. 2.6.0 keeps the pages and entries
        met in a tree ordered by (distance, level, the address of their node): at
        the same distance entries come before pages, then by node. Nodes are numbered
        here as 2.6.0's allocator places them: the last freed (of the page or entry
        just taken) first, else the next new one. (Past its first page of nodes, or
        after the tree freed pages, 2.6.0's addresses follow its memory: ties among
        many entries may then come in another order.)"""
        root = self.root
        if not root:
            return
        version = self.version
        distance = self.distance
        heap = [(distance(_page_cover(root, self._add), point), self.height, 0, root)]
        free: list = []
        fresh = 1
        while heap:
            _, level, node, child = heapq.heappop(heap)
            free.append(node)
            if level == 0:
                yield child
                if self.version != version:
                    return
                continue
            for box, below in child:
                if free:
                    node = free.pop()
                else:
                    node, fresh = fresh, fresh + 1
                heapq.heappush(heap, (distance(box, point), level - 1, node, below))

    def tuples(self) -> Iterator[Any]:
        return self.search([], _always, _always)


class RtreeIndex(Index):
    type = IndexType.RTREE

    def __init__(self, space: Any, index_def: Any, pk_def: Any = None):
        super().__init__(space, index_def, pk_def)
        self._point_lookup = False
        opts = index_def.opts
        self.dimension = int(opts.get("dimension", 2))
        self.manhattan = str(opts.get("distance", "euclid")).lower() == "manhattan"
        self._extract = self.key_def.extract_key
        self.clear()

    def clear(self) -> None:
        self._data: dict = {}         # id(tuple) -> tuple
        self._boxes: dict = {}        # id(tuple) -> its box
        self.tree = RTree(self.dimension, self.manhattan)
        self._leaving: tuple | None = None  # (box, tuple): see delete_raw
        self._handed: dict = {}       # id(tuple) -> the tree's version when handed out

    # -- modification -------------------------------------------------------------

    def replace(self, old: Any, new: Any, mode: Any) -> Any:
        self._settle()
        if new is not None:
            self._store(None, new)
        if old is not None:
            self._delete_raw(old)
        return old

    def delete_raw(self, tup: Any) -> None:
        """A statement undone (or a replace refused by a later index): `new` goes out
        here, then `old` comes back with insert_raw. 2.6.0 undoes it with a replace
        of new by old, which puts old in before it takes new out, and the order
        shapes the tree: so the tuple leaves the tree at the next call, after
        insert_raw's insertion when one follows."""
        self._settle()
        if self._data.pop(id(tup), None) is not None:
            self._leaving = (self._boxes.pop(id(tup)), tup)

    def _settle(self) -> None:
        if self._leaving is not None:
            box, tup = self._leaving
            self._leaving = None
            self.tree.remove(box, tup)

    def insert_raw(self, tup: Any) -> None:
        leaving = self._leaving
        if leaving is not None and leaving[1] is tup:     # (it comes back: it stays)
            self._leaving = None
            self._boxes[id(tup)], self._data[id(tup)] = leaving
            return
        self._store(None, tup)
        self._settle()

    def build(self, tuples: Any) -> None:
        self._settle()
        for tup in tuples:
            self._store(None, tup)

    def _store(self, key: Any, tup: Any) -> None:
        key = id(tup)
        if key in self._data:
            return
        value = self._extract(tup)[0]
        if isinstance(value, (list, tuple)) and not all(map(_is_number, value)):
            # (2.6.0 decodes the coordinates as numbers of the field)
            raise ClientError(ErrorCode.ER_FIELD_TYPE, str(self.key_def.parts[0].fieldno + 1),
                              FieldType.NUMBER.value)
        box = self.rect(value, "Field")
        self._boxes[key] = box
        self._data[key] = tup
        self.tree.insert(box, tup)

    def _delete_raw(self, tup: Any) -> None:
        if self._data.pop(id(tup), None) is not None:
            self.tree.remove(self._boxes.pop(id(tup)), tup)

    def rect(self, value: Any, what: str) -> list:
        """A point or box as [lo0, hi0, lo1, hi1, ...], or 2.6.0's ER_RTREE_RECT."""
        dim = self.dimension
        ok = (isinstance(value, (list, tuple)) and len(value) in (dim, 2 * dim) and
              all(map(_is_number, value)))
        if not ok:
            raise ClientError(ErrorCode.ER_RTREE_RECT, what, dim, 2 * dim)
        box: list = []
        if len(value) == dim:
            for v in value:
                v = float(v)
                box += (v, v)
            return box
        for i in range(dim):
            a, b = float(value[i]), float(value[i + dim])
            box += (a, b) if a <= b else (b, a)
        return box

    # -- reading ------------------------------------------------------------------

    def validate_search_key(self, it: It, key: list) -> None:
        """key_validate() of an RTREE: one array, or the coordinates themselves."""
        dim, n = self.dimension, len(key)
        if n == 0:
            if it is not It.ALL:
                raise ClientError(ErrorCode.ER_KEY_PART_COUNT, 2 * dim, 0)
            return
        if n == 1:
            if not isinstance(key[0], (list, tuple)):
                raise ClientError(ErrorCode.ER_KEY_PART_TYPE, 0, FieldType.ARRAY.value)
            if len(key[0]) in (dim, 2 * dim) and not all(map(_is_number, key[0])):
                raise ClientError(ErrorCode.ER_KEY_PART_TYPE, 0, FieldType.NUMBER.value)
            self.rect(key[0], "Key")
        elif n in (dim, 2 * dim):
            self.rect(key, "Key")
        else:
            raise ClientError(ErrorCode.ER_KEY_PART_COUNT, 2 * dim, n)

    def _validate_iterator(self, it: It) -> None:
        if it not in _SEARCH and it is not It.NEIGHBOR:
            raise self.unsupported("requested iterator type")

    def _iterate(self, it: It, key: list) -> Iterator[Any]:
        self._settle()
        if it is It.ALL or not key:
            found = self.tree.tuples()
        else:
            query = self.rect(key if len(key) != 1 else key[0], "Key")
            if it is It.NEIGHBOR:
                found = self.tree.neighbors(query)
            else:
                page_test, entry_test = self.tree.tests[it]
                found = self.tree.search(query, page_test, entry_test)
        return self._remembered(found)

    def _remembered(self, found: Iterator[Any]) -> Iterator[Any]:
        handed, version = self._handed, self.tree.version
        if len(handed) > 4096:
            handed.clear()
        for tup in found:
            handed[id(tup)] = version
            yield tup

    def resume_after(self, it: It, key: list, after: Any) -> Iterator[Any]:
        """Lua's pairs() past tuple `after`, the last it was handed (lua/box/space.py
        iterate_after). 2.6.0's iterator ends once the tree has changed; while it
        has not, the same search again, past `after`."""
        stored = stored_tuple(self, after)
        if stored is None or self._handed.get(id(stored)) != self.tree.version or \
                self._leaving is not None:
            return iter(())
        return self._past(self._iterate(it, key), stored)

    @staticmethod
    def _past(found: Iterator[Any], after: Any) -> Iterator[Any]:
        for tup in found:
            if tup is after:
                break
        yield from found

    def _values(self):
        self._settle()
        return list(self.tree.tuples())

    def __len__(self) -> int:
        return len(self._data)
