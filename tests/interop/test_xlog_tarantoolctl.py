"""Files written by Spindle's XlogWriter, read back by the real `tarantoolctl cat` 2.6.0.

Also pins that the real reader and ours agree on damaged files: a torn tail
loses exactly the cut block, and a corrupt block in the middle is skipped (cat
reads the way force_recovery does).
"""
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from spindle.core.iproto.constants import GroupId, IprotoType, type_name
from spindle.core.iproto.request import encode_dml_body, encode_snapshot_body, synchro_row
from spindle.core.iproto.xrow import XRow
from spindle.core.xlog.format import XlogMeta, decode_file
from spindle.core.vclock import VClock
from spindle.core.xlog.files import XlogReader, XlogWriter

UUID = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
CAT_BODY_KEYS = {"space_id": 0x10, "index_id": 0x11, "index_base": 0x15, "key": 0x20,
                 "tuple": 0x21, "operations": 0x28}


def tarantoolctl() -> str:
    path = shutil.which("tarantoolctl")
    if path is None:
        pytest.fail("tarantoolctl (Tarantool 2.6.0) must be installed for interop tests")
    return path


def cat(path: Path) -> list[dict]:
    result = subprocess.run([tarantoolctl(), "cat", str(path), "--show-system"],
                            capture_output=True, timeout=60, check=True)
    return [doc for doc in yaml.safe_load_all(result.stdout.decode()) if doc]


def check_row(row: XRow, doc: dict):
    head = doc["HEADER"]
    assert head.get("lsn", 0) == row.lsn
    assert head.get("replica_id", 0) == row.replica_id
    assert head.get("group_id", 0) == row.group_id
    assert head["type"] == (type_name(row.type) or row.type)
    assert abs(head.get("timestamp", 0) - row.timestamp) < 1e-3
    if row.tsn and (row.tsn != row.lsn or not row.is_commit):
        assert (head["tsn"], head.get("commit", False)) == (row.tsn, row.is_commit)
    else:
        assert "tsn" not in head
    if row.body is None:
        assert "BODY" not in doc
        return
    body = doc["BODY"]
    if isinstance(body, list):    # {2: a, 3: b} comes out as a Lua array
        expected = {i + 1: v for i, v in enumerate(body) if v is not None}
    else:
        expected = {CAT_BODY_KEYS[k]: v for k, v in body.items()}
    assert row.body_map() == expected


TS = 1795308837.25


def dml(rtype, lsn, space_id=512, **kwargs) -> XRow:
    return XRow(type=rtype, replica_id=1, lsn=lsn, timestamp=TS + lsn,
                body=encode_dml_body(rtype, space_id, **kwargs))


def sample_transactions() -> list[list[XRow]]:
    txs = [
        [dml(IprotoType.INSERT, 1, space_id=280,
             tuple=[512, 1, "test", "memtx", 0, {}, [{"name": "id", "type": "unsigned"}]])],
        [dml(IprotoType.INSERT, 2, tuple=[1, "a", b"\x00\xffbin", -3, 2**40, None, True,
                                          {"k": [1, {"n": "ünï"}]}, 0.5])],
        [dml(IprotoType.REPLACE, 3, tuple=[2, "bb"])],
        [dml(IprotoType.UPDATE, 4, index_base=1, key=[1], ops=[["=", 2, "aa"], ["+", 3, 1]])],
        [dml(IprotoType.UPSERT, 5, index_base=1, tuple=[3, "c"], ops=[["=", 2, "cc"]])],
        [dml(IprotoType.DELETE, 6, index_id=1, key=[2])],
        [synchro_row(IprotoType.CONFIRM, 1, 6, replica_id=1, lsn=7, timestamp=TS + 7)],
        [XRow(type=IprotoType.NOP, replica_id=1, lsn=8, timestamp=TS + 8)],
        [XRow(type=IprotoType.INSERT, replica_id=0, group_id=GroupId.LOCAL, lsn=1,
              timestamp=TS + 9, body=encode_dml_body(IprotoType.INSERT, 600, tuple=[1, "local"]))],
        [synchro_row(IprotoType.ROLLBACK, 1, 9, replica_id=1, lsn=10, timestamp=TS + 10)],
    ]
    multi = [dml(IprotoType.INSERT, lsn, tuple=[lsn, "multi"]) for lsn in (11, 12, 13)]
    for row in multi:
        row.tsn, row.is_commit = 11, False
    multi[-1].is_commit = True
    txs.append(multi)
    big = [dml(IprotoType.INSERT, lsn, tuple=[lsn, "z" * 300]) for lsn in range(14, 34)]
    for row in big:
        row.tsn, row.is_commit = 14, False
    big[-1].is_commit = True
    txs.append(big)   # over 2 KiB: a zstd block
    return txs


@pytest.fixture
def xlog_file(tmp_path) -> tuple[Path, list[list[XRow]]]:
    txs = sample_transactions()
    meta = XlogMeta("XLOG", UUID, VClock(), prev_vclock=VClock())
    writer = XlogWriter.create(str(tmp_path), meta, sync="never")
    for transaction in txs:
        writer.write_tx(transaction)
    writer.close()
    return Path(writer.path), txs


def test_tarantoolctl_reads_our_xlog(xlog_file):
    path, txs = xlog_file
    rows = [row for transaction in txs for row in transaction]
    contents = decode_file(path.read_bytes())
    assert any(block.compressed for block in contents.blocks)
    docs = cat(path)
    assert len(docs) == len(rows)
    for row, doc in zip(rows, docs):
        check_row(row, doc)


def test_tarantoolctl_reads_our_snapshot(tmp_path):
    writer = XlogWriter.create_snapshot(str(tmp_path), UUID, VClock({1: 40, 0: 2}), sync="never")
    rows = []
    for i in range(3000):
        local = i % 7 == 0
        row = XRow(type=IprotoType.INSERT, lsn=i, timestamp=TS,
                   group_id=GroupId.LOCAL if local else 0,
                   body=encode_snapshot_body(600 if local else 512, [i, f"value-{i}" * 8]))
        rows.append(row)
        writer.add_row(row)
    writer.close()
    path = Path(writer.path)
    assert path.name == "00000000000000000042.snap"
    contents = decode_file(path.read_bytes())
    assert len(contents.blocks) > 1 and all(b.compressed for b in contents.blocks)
    docs = cat(path)
    assert len(docs) == len(rows)
    for row, doc in zip(rows, docs):
        check_row(row, doc)


def test_torn_tail_agrees_with_tarantool(xlog_file, tmp_path):
    path, txs = xlog_file
    data = path.read_bytes()
    contents = decode_file(data)
    cut_block = contents.blocks[-3]
    torn = tmp_path / "torn" / path.name
    torn.parent.mkdir()
    torn.write_bytes(data[:cut_block.offset + cut_block.size // 2])
    with XlogReader(str(torn)) as reader:
        ours = list(reader.rows())
        assert reader.torn_tail is not None and not reader.eof_marker
    docs = cat(torn)
    assert [d["HEADER"]["lsn"] for d in docs] == [r.lsn for r in ours]
    assert len(ours) == sum(len(b.rows) for b in contents.blocks[:-3])


def test_corrupt_block_agrees_with_tarantool_force_recovery(xlog_file, tmp_path):
    path, txs = xlog_file
    data = bytearray(path.read_bytes())
    contents = decode_file(bytes(data))
    victim = contents.blocks[3]
    data[victim.offset + victim.size - 2] ^= 0x20
    damaged = tmp_path / "damaged" / path.name
    damaged.parent.mkdir()
    damaged.write_bytes(bytes(data))
    with XlogReader(str(damaged), force_recovery=True) as reader:
        ours = list(reader.rows())
        assert [e.offset for e in reader.skipped] == [victim.offset]
    docs = cat(damaged)
    assert [d["HEADER"]["lsn"] for d in docs] == [r.lsn for r in ours]
    assert victim.rows[0].lsn not in [r.lsn for r in ours if r.replica_id == 1]
