"""The compiled row walker agrees with the Python walker (scan.iter_rows)
everywhere: on real files, on generated rows of every MsgPack encoding, on
garbage, and through whole scans (filters, names, torn tails, columns)."""
from __future__ import annotations

import struct

import msgpack
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spindle.spark_ext import walked, walker
from spindle.spark_ext.plan import plan_tasks
from spindle.spark_ext.rows import ARROW_SCHEMA, COLUMN_NAMES, RowFilter
from spindle.spark_ext.scan import ROW_ERRORS, RowError, Scan, iter_rows, open_file, payloads

from . import transcripts as tr

FIXTURE_FILES = sorted(p for d in (tr.FIXTURES / "master", tr.FIXTURES / "replica")
                       for p in d.iterdir() if p.suffix in (".xlog", ".snap"))


def _fail(exc, block, row_pos):
    raise RowError(f"block {block} row {row_pos}: {exc}") from exc


def _python_only(buf, bounds, ints, ts, commit):
    """A compiled walker that accepts nothing: every block takes the Python path."""
    return walker.UNSUPPORTED, 0, 0


def walk_both(payloads: list[bytes], monkeypatch) -> tuple:
    """(compiled result, Python result): each a tuple of arrays or the error text."""
    results = []
    for compiled in (True, False):
        with monkeypatch.context() as patch:
            if not compiled:
                patch.setattr(walker, "walk", _python_only)
            try:
                rows = walked.RowWalker(iter_rows, ROW_ERRORS, _fail).walk(payloads)
                results.append((rows.ints.copy(), rows.ts.copy(), rows.commit.copy()))
            except RowError as exc:
                results.append(str(exc))
    return tuple(results)


def assert_same(payloads, monkeypatch) -> None:
    compiled, python = walk_both(payloads, monkeypatch)
    if isinstance(python, str) or isinstance(compiled, str):
        assert compiled == python
        return
    for got, want in zip(compiled, python):
        np.testing.assert_array_equal(got, want)


def file_payloads(path) -> list[bytes]:
    with open_file(str(path)) as reader:
        return [data for _, _, data in payloads(reader)]


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_files_walk_the_same(path, monkeypatch):
    payloads = file_payloads(path)
    assert_same(payloads, monkeypatch)
    rows = walked.RowWalker(iter_rows, ROW_ERRORS, _fail).walk(payloads)
    assert rows.n == sum(1 for p in payloads for _ in iter_rows(p))
    # Tarantool's rows are all the compiled walker's own (no Python fallback).
    for payload in payloads:
        n = sum(1 for _ in iter_rows(payload))
        status, walked_rows, _ = walker.walk(
            np.frombuffer(payload, np.uint8), np.array([0, len(payload)], np.int64),
            np.empty((n, 15), np.int64), np.empty(n), np.empty(n, np.bool_))
        assert (status, walked_rows) == (walker.OK, n)


def test_written_dirs_walk_the_same(tarantool_data, spindle_data, monkeypatch):
    for directory in (tarantool_data, spindle_data):
        for path in sorted(directory.glob("*.[xs][ln][oa]*")):
            assert_same(file_payloads(path), monkeypatch)


# ---------------------------------------------------------------------------
# Generated rows: every integer width, float32/float64/integer timestamps,
# nested values, non-DML bodies, NOPs, unknown keys.

def _uint(value: int, width: int) -> bytes:
    """An unsigned integer in a chosen (not necessarily the smallest) form."""
    tag, fmt = {1: (b"\xcc", ">B"), 2: (b"\xcd", ">H"), 4: (b"\xce", ">I"), 8: (b"\xcf", ">Q")}[width]
    return tag + struct.pack(fmt, value)


ints = st.one_of(st.integers(0, 127), st.integers(-32, -1), st.integers(-(1 << 63), (1 << 64) - 1))
small = st.integers(0, 1 << 31)
leaves = st.one_of(st.none(), st.booleans(), ints, st.floats(allow_nan=False),
                   st.text(max_size=8), st.binary(max_size=8))
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.integers(0, 40) | st.text(max_size=3),
                                                inner, max_size=3)), max_leaves=8)


@st.composite
def encoded_int(draw, strategy=small) -> bytes:
    value = draw(strategy)
    if 0 <= value < (1 << 32) and draw(st.booleans()):
        width = draw(st.sampled_from([w for w in (1, 2, 4, 8) if value < 1 << (8 * w)]))
        return _uint(value, width)
    return msgpack.packb(value)


@st.composite
def timestamp(draw) -> bytes:
    kind = draw(st.sampled_from(["double", "single", "int", "huge", "nan"]))
    if kind == "double":
        return msgpack.packb(draw(st.floats(allow_nan=False, allow_infinity=False)))
    if kind == "single":
        return b"\xca" + struct.pack(">f", draw(st.floats(width=32, allow_nan=False)))
    if kind == "int":
        return msgpack.packb(draw(st.integers(-(1 << 60), 1 << 60)))
    if kind == "huge":
        return msgpack.packb(draw(st.integers(1 << 53, (1 << 64) - 1)))
    return msgpack.packb(float("nan"))


@st.composite
def row(draw) -> bytes:
    rtype = draw(st.sampled_from([2, 3, 4, 5, 9, 12, 40, 41, 30, 0, 77]))
    fields = [(b"\x00", encoded_int(st.just(rtype))), (b"\x02", encoded_int()),
              (b"\x03", encoded_int(ints)), (b"\x04", timestamp()), (b"\x07", encoded_int()),
              (b"\x08", encoded_int(ints)), (b"\x09", encoded_int(st.integers(0, 3))),
              (b"\x05", encoded_int()), (msgpack.packb("s"), st.just(msgpack.packb(1)))]
    chosen = draw(st.lists(st.sampled_from(range(len(fields))), max_size=8))
    header = bytearray(msgpack.packb({}) if not chosen else bytes([0x80 | len(chosen)]))
    if chosen:
        for i in chosen:
            key, value = fields[i]
            header += key + draw(value)
    if rtype == 12 and draw(st.booleans()):
        return bytes(header)
    if rtype in (2, 3, 4, 5, 9) and draw(st.integers(0, 9)):
        keys = draw(st.lists(st.sampled_from([0x10, 0x11, 0x15, 0x20, 0x21, 0x28, 0x01, 0x30]),
                             max_size=6))
        body = bytearray([0x80 | len(keys)])
        for key in keys:
            body += msgpack.packb(key)
            if key in (0x10, 0x11, 0x15) and draw(st.integers(0, 5)):
                body += draw(encoded_int(st.integers(-5, 1 << 33)))
            else:
                body += msgpack.packb(draw(values))
        return bytes(header + body)
    return bytes(header) + msgpack.packb(draw(values))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(row(), min_size=1, max_size=6), min_size=1, max_size=4))
def test_generated_rows_walk_the_same(monkeypatch, blocks):
    assert_same([b"".join(rows) for rows in blocks], monkeypatch)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(row(), min_size=1, max_size=6), st.data())
def test_cut_and_garbled_rows_walk_the_same(monkeypatch, rows, data):
    payload = bytearray(b"".join(rows))
    if data.draw(st.booleans()):
        payload = payload[:data.draw(st.integers(0, len(payload) - 1))]
    else:
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] = data.draw(st.integers(0, 255))
    assert_same([bytes(payload), msgpack.packb({0: 2, 3: 1}) + msgpack.packb({0x10: 512})],
                monkeypatch)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=64))
def test_garbage_walks_the_same(monkeypatch, garbage):
    assert_same([garbage], monkeypatch)


def test_a_row_never_runs_into_the_next_block(monkeypatch):
    whole = msgpack.packb({0: 2, 3: 7}) + msgpack.packb({0x10: 512, 0x21: [1, 2]})
    payloads = [whole[:-3], whole[-3:] + whole]
    compiled, python = walk_both(payloads, monkeypatch)
    assert isinstance(compiled, str) and compiled == python


def test_unsupported_block_is_walked_by_python_between_compiled_ones(monkeypatch):
    good = msgpack.packb({0: 2, 2: 1, 3: 5}) + msgpack.packb({0x10: 512, 0x21: [1]})
    odd = msgpack.packb({0: 2, 2: 1, 3: 6, "x": 1}) + msgpack.packb({0x10: 512, 0x21: [2]})
    payloads = [good, odd, good]
    assert_same(payloads, monkeypatch)
    rows = walked.RowWalker(iter_rows, ROW_ERRORS, _fail).walk(payloads)
    assert rows.field(walked.LSN).tolist() == [5, 6, 5]


def test_arrays_grow_for_many_rows(monkeypatch):
    one = msgpack.packb({0: 2, 3: 1}) + msgpack.packb({0x10: 512, 0x21: [1]})
    payloads = [one * 3000, one * 10]
    rows = walked.RowWalker(iter_rows, ROW_ERRORS, _fail).walk(payloads)
    assert rows.n == 3010
    assert_same(payloads, monkeypatch)


def test_out_of_range_values_are_row_errors():
    for header in ({0: 2, 3: 1 << 63}, {0: 2, 3: 1.5}, {0: 2, 4: "now"}, {0: 2, 2: True}):
        payload = msgpack.packb(header) + msgpack.packb({0x10: 512})
        with pytest.raises(RowError, match="block 0 row 0"):
            walked.RowWalker(iter_rows, ROW_ERRORS, _fail).walk([payload])


# ---------------------------------------------------------------------------
# Whole scans: the same batches with the compiled walker and without it.

def scan_table(path, kind, monkeypatch, *, compiled=True, filters=None, **kwargs) -> pa.Table:
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(walker, "walk", _python_only)
        batches = [b for task in plan_tasks(str(path), kind, filters)
                   for b in Scan(task, filters, **kwargs).batches()]
    schema = batches[0].schema if batches else ARROW_SCHEMA
    return pa.Table.from_batches(batches, schema=schema)


@pytest.mark.parametrize("conditions", [(), (("space_id", ">=", 512),), (("lsn", "<", 30),),
                                        (("replica_id", "in", (1,)), ("lsn", ">", 5))], ids=str)
def test_scans_agree_with_python_walking(tarantool_data, spindle_data, monkeypatch, conditions):
    for directory in (tarantool_data, spindle_data):
        filters = RowFilter.from_conditions(conditions)
        compiled = scan_table(directory, "xlog", monkeypatch, filters=filters)
        python = scan_table(directory, "xlog", monkeypatch, compiled=False, filters=filters)
        assert compiled.num_rows and compiled.equals(python)


def test_columns_are_a_projection_of_the_full_scan(tarantool_data, monkeypatch):
    full = scan_table(tarantool_data, "xlog", monkeypatch)
    for columns in (["space_name", "type"], ["tuple_json", "lsn", "file"], ["is_commit"],
                    list(reversed(COLUMN_NAMES))):
        part = scan_table(tarantool_data, "xlog", monkeypatch, columns=columns)
        assert part.column_names == columns
        assert part.equals(full.select(columns))


def test_unknown_column_is_refused(tarantool_data):
    task = plan_tasks(str(tarantool_data), "xlog")[0]
    with pytest.raises(ValueError, match="no such xlog column: nope"):
        Scan(task, columns=["lsn", "nope"])


def test_factorize_agrees_with_unique():
    from spindle.spark_ext.scan import _FACTORIZE_TABLE, _factorize
    rng = np.random.default_rng(7)
    for values in (np.array([], np.int64), np.array([-1, -1]), np.array([513, 2, 512, 2, -1]),
                   rng.integers(-1, 40, 500), np.array([5, _FACTORIZE_TABLE + 3, -7, 5])):
        found, inverse = _factorize(values)
        want_found, want_inverse = np.unique(values, return_inverse=True)
        assert found.tolist() == want_found.tolist()
        assert inverse.tolist() == want_inverse.tolist() and inverse.dtype == np.int32


def test_string_columns_agree_with_arrow_take():
    from spindle.spark_ext.scan import _strings
    rng = np.random.default_rng(11)
    for names, codes in ((["INSERT", "", "ünïcode", "x" * 300], rng.integers(-1, 4, 1000)),
                         (["users"], np.array([0, 0, -1, 0])),
                         ([], np.array([-1, -1])),
                         (["a", "b"], np.array([], np.int64))):
        codes = codes.astype(np.int32)
        got = _strings(names, codes)
        want = pa.array(names, pa.string()).take(pa.array(codes, mask=codes < 0))
        got.validate(full=True)
        assert got.type == pa.string() and got.equals(want)


@pytest.mark.parametrize("batch_rows", [1, 7, 100, 8192])
@pytest.mark.parametrize("conditions", [(), (("space_id", ">=", 512),), (("lsn", "<", 30),)],
                         ids=str)
def test_batches_hold_at_most_batch_rows_and_the_same_rows(tarantool_data, monkeypatch,
                                                            batch_rows, conditions):
    filters = RowFilter.from_conditions(conditions)
    whole = scan_table(tarantool_data, "xlog", monkeypatch, filters=filters, batch_rows=1 << 30)
    batches = [b for task in plan_tasks(str(tarantool_data), "xlog", filters)
               for b in Scan(task, filters, batch_rows=batch_rows).batches()]
    assert all(0 < b.num_rows <= batch_rows for b in batches)
    assert pa.Table.from_batches(batches, schema=whole.schema).equals(whole)


@pytest.mark.parametrize("where", ["header", "body"])
def test_a_string_that_is_not_utf8_is_walked_past_the_same(monkeypatch, where):
    """MsgPack strings are not checked for UTF-8 on the way (2.6.0's decoders never
    check them): a header value or a body field the walk does not read that is
    not UTF-8 is passed over by both walkers, not an error of one of them."""
    bad = b"\xa3\xe0\x06\x80"                   # a 3-byte str, not UTF-8
    if where == "header":                       # {REQUEST_TYPE: 2, LSN: 5, 0x40: bad}
        payload = b"\x83\x00\x02\x03\x05\x40" + bad + msgpack.packb({0x10: 512, 0x21: [1]})
    else:                                       # {SPACE_ID: 512, TUPLE: [1], 0x40: bad}
        payload = (msgpack.packb({0: 2, 3: 5}) + b"\x83\x10\xcd\x02\x00\x21\x91\x01\x40"
                   + bad)
    compiled, python = walk_both([payload], monkeypatch)
    assert not isinstance(python, str), python
    assert_same([payload], monkeypatch)
