"""Space.load_rows, the bootstrap's bulk load, against the general path it replaces:
an autocommit replace() per row must give the same data and the same catalogue."""
from __future__ import annotations

import pytest

from spindle.core.box.schema import Schema, load_bootstrap_rows
from spindle.core.box.txn import Engine
from spindle.core.iproto.errors import ClientError, ErrorCode


def _fresh(rows) -> tuple[Engine, Schema]:
    engine = Engine()
    schema = Schema(engine)
    schema.create_system_spaces(rows)
    return engine, schema


def _state(engine: Engine, schema: Schema) -> dict:
    spaces = {
        space.id: (space.name, space.format, space.bsize(),
                   {iid: (index.name, index.index_def.type, index.unique,
                          list(index.index_def.key_def.parts), index.select([]))
                    for iid, index in space.indexes.items()})
        for space in engine.spaces.values()}
    return {"spaces": spaces, "version": schema.version, "users": schema.users,
            "grants": schema.grants, "funcs": schema.funcs,
            "collations": schema.collations, "cluster": schema.cluster,
            "max_id": schema.max_id, "schema_version_row": schema.schema_version_row,
            "replicaset_uuid": schema.replicaset_uuid}


def test_load_rows_gives_what_replace_per_row_gives():
    rows = sorted(load_bootstrap_rows(), key=lambda item: item[0])
    general, general_schema = _fresh(rows)
    for space_id, tup in rows:
        general.space(space_id).replace(tup)
    bulk, bulk_schema = _fresh(rows)
    by_space: dict[int, list] = {}
    for space_id, tup in rows:
        by_space.setdefault(space_id, []).append(tup)
    for space_id in sorted(by_space):
        bulk.space(space_id).load_rows(by_space[space_id])
    assert _state(bulk, bulk_schema) == _state(general, general_schema)
    assert bulk.txns.current is None


def test_load_rows_refuses_a_repeated_key_and_a_bad_tuple():
    engine, _schema = _fresh(load_bootstrap_rows())
    with pytest.raises(ClientError) as err:
        engine.space("_schema").load_rows([["a", 1], ["a", 2]])
    assert err.value.code == ErrorCode.ER_TUPLE_FOUND
    engine, _schema = _fresh(load_bootstrap_rows())
    with pytest.raises(ClientError) as by_replace:
        engine.space("_schema").replace([1, 2])
    with pytest.raises(ClientError) as by_load:
        engine.space("_schema").load_rows([[1, 2]])
    assert (by_load.value.code, by_load.value.message) == \
        (by_replace.value.code, by_replace.value.message)
