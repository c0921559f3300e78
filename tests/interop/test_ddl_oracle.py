"""Ddl against the real Tarantool 2.6.0 binary.

* Rows: the same box.schema calls run in a real tarantool (its .xlog files are read
  back with Spindle's XlogReader) and through Spindle's Ddl (rows collected from the
  journal). The (type, space, index, key, tuple, ops, group) sequences must be equal,
  but for the creation dates of `_func` rows; with `atomic=False` the transaction
  boundaries must be equal too.
* Errors: ~60 bad or refused calls (arguments, existence, C-trigger checks, grants,
  access as another user) in both, in order, with the same code and message.
* Access over IPROTO: guest and other users denied by the real server (tarantool
  connector and a raw JOIN) get the message Spindle's Access produces.
"""
from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import uuid
from contextlib import contextmanager
from types import SimpleNamespace

import msgpack
import pytest
import tarantool
from tarantool.request import RequestInsert, RequestSelect

from spindle.core.box.access import Access, Priv
from spindle.core.box.ddl import Ddl
from spindle.core.box.schema import Schema, load_bootstrap_rows
from spindle.core.box.txn import Engine
from spindle.core.iproto.constants import IprotoType
from spindle.core.iproto.errors import BoxError
from spindle.core.iproto.request import decode_dml_body
from spindle.core.xlog.files import XlogReader

from .oracle import run_script, tarantool_binary

FUNC_SPACE = 296


# ------------------------------------------------------------------ Spindle side

def spindle(atomic: bool = True, with_access: bool = False) -> SimpleNamespace:
    txns: list[list] = []
    engine = Engine(journal=lambda rows: txns.append(list(rows)))
    schema = Schema(engine)
    rows = load_bootstrap_rows()
    schema.create_system_spaces(rows)
    for space_id, tup in rows:
        engine.space(space_id).replace(tup)
    txns.clear()
    user = [1]
    access = Access(schema) if with_access else None
    ddl = Ddl(engine, schema, lambda: user[0], access=access, atomic=atomic)
    ctx = SimpleNamespace(d=ddl, e=engine, s=schema, access=access, txns=txns, user=user)

    @contextmanager
    def su(name):
        saved = user[0]
        user[0] = schema.user_by_name(name).id
        try:
            yield
        finally:
            user[0] = saved
    ctx.su = su
    ctx.sid = lambda name: engine.space(name).id
    ctx.uid = lambda name: schema.user_by_name(name).id
    return ctx


def row_key(row) -> tuple:
    req = decode_dml_body(row.body, row.type) if row.type != IprotoType.NOP else None
    if req is None:
        return ("NOP", row.group_id)
    tup = req.tuple
    if req.space_id == FUNC_SPACE and tup is not None and len(tup) > 18:
        tup = list(tup[:17]) + ["<date>", "<date>"]
    return (IprotoType(row.type).name, req.space_id, req.index_id, req.key, tup, req.ops,
            row.group_id)


def oracle_transactions(workdir) -> list[list[tuple]]:
    txs = []
    for path in sorted(glob.glob(os.path.join(workdir, "*.xlog"))):
        with XlogReader(path) as reader:
            txs.extend([row_key(r) for r in tx] for tx in reader.transactions())
    return txs


# ------------------------------------------------------------------ the scenario

FMT = [{"name": "id", "type": "unsigned"}, ["val", "string"],
       {"name": "n", "type": "string", "is_nullable": True}]
FMT2 = [["id", "unsigned"], ["val", "string"], {1: "n", 2: "string", "is_nullable": True},
        {1: "x", 2: "any", "is_nullable": True}]


def idx(space, name, opts=None):
    return lambda c: c.d.index_create(c.sid(space), name, opts)


SCENARIO = [
    ("box.schema.user.create('repl', {password='secret'})",
     lambda c: c.d.user_create("repl", {"password": "secret"})),
    ("box.schema.user.grant('repl', 'replication')",
     lambda c: c.d.user_grant("repl", "replication")),
    ("box.schema.user.create('nopw')", lambda c: c.d.user_create("nopw")),
    ("box.schema.space.create('test', {format={{name='id',type='unsigned'},{'val','string'},"
     "{name='n',type='string',is_nullable=true}}})",
     lambda c: c.d.space_create("test", {"format": FMT})),
    ("box.space.test:create_index('pk')", idx("test", "pk")),
    ("box.space.test:create_index('sk', {parts={{2,'string'},{3,'string',is_nullable=true}},"
     " unique=false})",
     idx("test", "sk", {"parts": [[2, "string"], {1: 3, 2: "string", "is_nullable": True}],
                        "unique": False})),
    ("box.space.test:create_index('ck', {parts={{field=2, type='string', collation='unicode_ci'}}})",
     idx("test", "ck", {"parts": [{"field": 2, "type": "string", "collation": "unicode_ci"}]})),
    ("box.space.test:create_index('h', {type='hash', parts={1,'unsigned',2,'string'}})",
     idx("test", "h", {"type": "hash", "parts": [1, "unsigned", 2, "string"]})),
    ("box.space.test:create_index('byname', {parts={'val', {'n', is_nullable=true}}, unique=false})",
     idx("test", "byname", {"parts": ["val", {1: "n", "is_nullable": True}], "unique": False})),
    ("box.space.test:create_index('num', {parts={{1, 'num'}}, id=10})",
     idx("test", "num", {"parts": [[1, "num"]], "id": 10})),
    ("box.space.test:create_index('up', {parts={{field='id', type='UNSIGNED'}}, unique=true})",
     idx("test", "up", {"parts": [{"field": "id", "type": "UNSIGNED"}], "unique": True})),
    ("box.space.test:create_index('dup', {if_not_exists=true, parts={2, 'string'}})",
     idx("test", "dup", {"if_not_exists": True, "parts": [2, "string"]})),
    ("box.space.test:create_index('dup', {if_not_exists=true})",
     idx("test", "dup", {"if_not_exists": True})),
    ("box.schema.space.create('sync', {is_sync=true, field_count=3})",
     lambda c: c.d.space_create("sync", {"is_sync": True, "field_count": 3})),
    ("box.schema.space.create('nsync', {is_sync=false})",
     lambda c: c.d.space_create("nsync", {"is_sync": False})),
    ("box.schema.space.create('loc', {is_local=true, temporary=false})",
     lambda c: c.d.space_create("loc", {"is_local": True, "temporary": False})),
    ("box.schema.space.create('tmp', {temporary=true})",
     lambda c: c.d.space_create("tmp", {"temporary": True})),
    ("box.schema.space.create('tmp', {if_not_exists=true})",
     lambda c: c.d.space_create("tmp", {"if_not_exists": True})),
    ("box.schema.space.create('explicit', {id=9000, engine='memtx', format={{'a'}, 'b'}})",
     lambda c: c.d.space_create("explicit", {"id": 9000, "engine": "memtx",
                                             "format": [["a"], "b"]})),
    ("box.schema.space.create('owned', {user='repl'})",
     lambda c: c.d.space_create("owned", {"user": "repl"})),
    ("box.space.sync:create_index('pk')", idx("sync", "pk")),
    ("box.space.explicit:create_index('pk', {parts={1, 'string'}})",
     idx("explicit", "pk", {"parts": [1, "string"]})),
    ("box.space.owned:create_index('pk', {type='HASH'})", idx("owned", "pk", {"type": "HASH"})),
    ("box.space.test:insert{1, 'a'}", lambda c: c.e.space("test").insert([1, "a"])),
    ("box.space.test:truncate()", lambda c: c.d.space_truncate(c.sid("test"))),
    ("box.space.test:truncate()", lambda c: c.d.space_truncate(c.sid("test"))),
    ("box.space.test.index.sk:rename('sk2')", lambda c: c.d.index_rename(c.sid("test"), 1, "sk2")),
    ("box.space.test.index.sk2:alter({unique=true})",
     lambda c: c.d.index_alter(c.sid("test"), 1, {"unique": True})),
    ("box.space.test.index.num:alter({parts={{1,'unsigned'}}, name='num2'})",
     lambda c: c.d.index_alter(c.sid("test"), 10, {"parts": [[1, "unsigned"]], "name": "num2"})),
    ("box.space.test.index.up:alter({type='hash'})",
     lambda c: c.d.index_alter(c.sid("test"), "up", {"type": "hash"})),
    ("box.space.test:rename('test2')", lambda c: c.d.space_rename(c.sid("test"), "test2")),
    ("box.space.test2:format({{'id','unsigned'},{'val','string'},{'n','string',is_nullable=true},"
     "{'x','any',is_nullable=true}})", lambda c: c.d.space_format(c.sid("test2"), FMT2)),
    ("box.space.test2.index.h:drop()", lambda c: c.d.index_drop(c.sid("test2"), 3)),
    ("box.schema.func.create('f', {body='function() return 1 end'})",
     lambda c: c.d.func_create("f", {"body": "function() return 1 end"})),
    ("box.schema.func.create('g', {setuid=true, language='lua', comment='c'})",
     lambda c: c.d.func_create("g", {"setuid": True, "language": "lua", "comment": "c"})),
    ("box.schema.func.create('g', {if_not_exists=true})",
     lambda c: c.d.func_create("g", {"if_not_exists": True})),
    ("box.schema.user.grant('repl', 'execute', 'function', 'f')",
     lambda c: c.d.user_grant("repl", "execute", "function", "f")),
    ("box.schema.user.grant('repl', 'read,write', 'space', 'test2')",
     lambda c: c.d.user_grant("repl", "read,write", "space", "test2")),
    ("box.schema.user.grant('repl', 'read', 'space')",
     lambda c: c.d.user_grant("repl", "read", "space")),
    ("box.schema.user.grant('repl', 'create,drop', 'universe')",
     lambda c: c.d.user_grant("repl", "create,drop", "universe")),
    ("box.schema.user.grant('repl', 'alter', 'space', 'sync')",
     lambda c: c.d.user_grant("repl", "alter", "space", "sync")),
    ("box.schema.role.create('r1')", lambda c: c.d.role_create("r1")),
    ("box.schema.role.create('r2')", lambda c: c.d.role_create("r2")),
    ("box.schema.role.create('r2', {if_not_exists=true})",
     lambda c: c.d.role_create("r2", {"if_not_exists": True})),
    ("box.schema.role.grant('r1', 'read', 'universe')",
     lambda c: c.d.role_grant("r1", "read", "universe")),
    ("box.schema.role.grant('r2', 'r1')", lambda c: c.d.role_grant("r2", "r1")),
    ("box.schema.role.grant('r1', 'execute', 'function', 'g')",
     lambda c: c.d.role_grant("r1", "execute", "function", "g")),
    ("box.schema.user.grant('repl', 'r2')", lambda c: c.d.user_grant("repl", "r2")),
    ("box.schema.user.grant('nopw', 'write', 'space', 'sync', {if_not_exists=true})",
     lambda c: c.d.user_grant("nopw", "write", "space", "sync", {"if_not_exists": True})),
    ("box.schema.user.grant('nopw', 'write', 'space', 'sync', {if_not_exists=true})",
     lambda c: c.d.user_grant("nopw", "write", "space", "sync", {"if_not_exists": True})),
    ("box.schema.user.grant('nopw', 3, 'space', 'sync')",
     lambda c: c.d.user_grant("nopw", 3, "space", "sync")),
    ("box.schema.user.revoke('repl', 'read', 'space', 'test2')",
     lambda c: c.d.user_revoke("repl", "read", "space", "test2")),
    ("box.schema.user.revoke('repl', 'create', 'universe')",
     lambda c: c.d.user_revoke("repl", "create", "universe")),
    ("box.schema.user.revoke('nopw', 'read', 'space', 'nsync', {if_exists=true})",
     lambda c: c.d.user_revoke("nopw", "read", "space", "nsync", {"if_exists": True})),
    ("box.schema.user.passwd('nopw', 'pw2')", lambda c: c.d.user_passwd("nopw", "pw2")),
    ("box.schema.user.disable('nopw')", lambda c: c.d.user_disable("nopw")),
    ("box.schema.user.enable('nopw')", lambda c: c.d.user_enable("nopw")),
    ("box.space.test2:drop()", lambda c: c.d.space_drop(c.sid("test2"), "test2")),
    ("box.schema.func.drop('f')", lambda c: c.d.func_drop("f")),
    ("box.schema.user.drop('repl')", lambda c: c.d.user_drop("repl")),
    ("box.schema.role.drop('r1')", lambda c: c.d.role_drop("r1")),
    ("box.schema.role.drop('r2')", lambda c: c.d.role_drop("r2")),
    ("box.schema.func.drop('g')", lambda c: c.d.func_drop("g")),
    ("box.space.tmp:truncate()", lambda c: c.d.space_truncate(c.sid("tmp"))),
    ("box.space.loc:truncate()", lambda c: c.d.space_truncate(c.sid("loc"))),
    ("box.space.sync:drop()", lambda c: c.d.space_drop(c.sid("sync"), "sync")),
    ("box.schema.user.drop('nopw')", lambda c: c.d.user_drop("nopw")),
    ("box.schema.user.drop('nobody', {if_exists=true})",
     lambda c: c.d.user_drop("nobody", {"if_exists": True})),
    ("box.schema.space.drop(7777, nil, {if_exists=true})",
     lambda c: c.d.space_drop(7777, None, {"if_exists": True})),
    ("box.schema.user.create('later')", lambda c: c.d.user_create("later")),
    ("box.schema.role.create('rlater')", lambda c: c.d.role_create("rlater")),
    ("box.schema.func.create('flater')", lambda c: c.d.func_create("flater")),
    ("box.schema.space.create('slater')", lambda c: c.d.space_create("slater")),
]


def run_lua(tmp_path, body: str) -> str:
    script = "box.cfg{log_level=1}\nlocal json = require('json')\n" + body + "\nos.exit(0)\n"
    result = run_script(tarantool_binary(), script, tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def oracle_rows(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ddl_rows")
    run_lua(workdir, "\n".join(lua for lua, _ in SCENARIO))
    return oracle_transactions(workdir)


def test_rows_equal_real_tarantool(oracle_rows):
    ctx = spindle(atomic=True)
    for _, step in SCENARIO:
        step(ctx)
    ours = [row_key(r) for tx in ctx.txns for r in tx]
    theirs = [row for tx in oracle_rows for row in tx]
    assert len(ours) == len(theirs)
    for no, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"row {no}: {a} != {b}"


def test_rows_and_transactions_equal_real_tarantool_without_atomic(oracle_rows):
    ctx = spindle(atomic=False)
    for _, step in SCENARIO:
        step(ctx)
    assert [[row_key(r) for r in tx] for tx in ctx.txns] == oracle_rows


def test_one_call_one_transaction_in_atomic_mode(oracle_rows):
    ctx = spindle(atomic=True)
    sizes = []
    for _, step in SCENARIO:
        before = len(ctx.txns)
        step(ctx)
        sizes.append(len(ctx.txns) - before)
    assert set(sizes) <= {0, 1}
    assert sum(len(tx) for tx in ctx.txns) == sum(len(tx) for tx in oracle_rows)


# ------------------------------------------------------------------ errors

SETUP = [
    ("box.schema.user.create('repl', {password='secret'})",
     lambda c: c.d.user_create("repl", {"password": "secret"})),
    ("box.schema.user.grant('repl', 'replication')",
     lambda c: c.d.user_grant("repl", "replication")),
    ("box.schema.space.create('test', {format={{name='id',type='unsigned'},{'val','string'}}})",
     lambda c: c.d.space_create("test", {"format": [{"name": "id", "type": "unsigned"},
                                                    ["val", "string"]]})),
    ("box.space.test:create_index('pk')", idx("test", "pk")),
    ("box.schema.space.create('sync', {is_sync=true})",
     lambda c: c.d.space_create("sync", {"is_sync": True})),
    ("box.schema.role.create('r1')", lambda c: c.d.role_create("r1")),
    ("box.schema.role.create('r2')", lambda c: c.d.role_create("r2")),
    ("box.schema.func.create('f')", lambda c: c.d.func_create("f")),
    ("box.schema.user.create('u2')", lambda c: c.d.user_create("u2")),
]


def as_user(name, fn):
    def step(c):
        with c.su(name):
            return fn(c)
    return step


ERRORS = [
    ("box.schema.space.create('test')", lambda c: c.d.space_create("test")),
    ("box.schema.space.create(1)", lambda c: c.d.space_create(1)),
    ("box.schema.space.create('x', {foo=1})", lambda c: c.d.space_create("x", {"foo": 1})),
    ("box.schema.space.create('x', {engine=1})", lambda c: c.d.space_create("x", {"engine": 1})),
    ("box.schema.space.create('x', 5)", lambda c: c.d.space_create("x", 5)),
    ("box.schema.space.create('x', {user='nobody'})",
     lambda c: c.d.space_create("x", {"user": "nobody"})),
    ("box.schema.space.create('x', {format={{type='unsigned'}}})",
     lambda c: c.d.space_create("x", {"format": [{"type": "unsigned"}]})),
    ("box.schema.space.create('x', {format={{'a', 'foo'}}})",
     lambda c: c.d.space_create("x", {"format": [["a", "foo"]]})),
    ("box.schema.space.create('x', {format={{'a', 5}}})",
     lambda c: c.d.space_create("x", {"format": [["a", 5]]})),
    ("box.schema.space.create('x', {format={{'a', 'string', collation='nope'}}})",
     lambda c: c.d.space_create("x", {"format": [{1: "a", 2: "string", "collation": "nope"}]})),
    ("box.schema.space.create('x', {is_local=true, is_sync=true})",
     lambda c: c.d.space_create("x", {"is_local": True, "is_sync": True})),
    ("box.schema.space.create('x', {engine='foo'})",
     lambda c: c.d.space_create("x", {"engine": "foo"})),
    ("box.schema.space.create('x', {id=0})", lambda c: c.d.space_create("x", {"id": 0})),
    ("box.schema.space.create('x', {id=2147483648})",
     lambda c: c.d.space_create("x", {"id": 2147483648})),
    ("box.schema.space.create('a\\1b')", lambda c: c.d.space_create("a\x01b")),
    ("box.schema.space.create('')", lambda c: c.d.space_create("")),
    ("box.schema.space.create('x', {field_count=1, format={{'a'},{'b'}}})",
     lambda c: c.d.space_create("x", {"field_count": 1, "format": [["a"], ["b"]]})),
    ("box.space.test:create_index('pk')", idx("test", "pk")),
    ("box.space.test:create_index('x', {parts={0,'unsigned'}})",
     idx("test", "x", {"parts": [0, "unsigned"]})),
    ("box.space.test:create_index('x', {parts={1,'unsigned',2}})",
     idx("test", "x", {"parts": [1, "unsigned", 2]})),
    ("box.space.test:create_index('x', {parts={{'nope'}}})", idx("test", "x", {"parts": [["nope"]]})),
    ("box.space.test:create_index('x', {parts={{0}}})", idx("test", "x", {"parts": [[0]]})),
    ("box.space.test:create_index('x', {parts={{2,'string', collation='nope'}}})",
     idx("test", "x", {"parts": [{1: 2, 2: "string", "collation": "nope"}]})),
    ("box.space.test:create_index('x', {type='bogus'})", idx("test", "x", {"type": "bogus"})),
    ("box.space.test:create_index('x', {parts={}})", idx("test", "x", {"parts": []})),
    ("box.space.test:create_index('x', {parts=1})", idx("test", "x", {"parts": 1})),
    ("box.space.test:create_index('x', {unique='yes'})", idx("test", "x", {"unique": "yes"})),
    ("box.space.test:create_index('x', {parts={{2,'foo'}}})",
     idx("test", "x", {"parts": [[2, "foo"]]})),
    ("box.space.test:create_index('x', {parts={{2, is_nullable=1}}})",
     idx("test", "x", {"parts": [{1: 2, "is_nullable": 1}]})),
    ("box.schema.index.create(99999, 'x')", lambda c: c.d.index_create(99999, "x")),
    ("box.space.test:create_index('x', {parts={{2,'string'}}, unique=false}) "
     "box.space.test.index.x:alter({id=7, unique=true})",
     lambda c: (idx("test", "x", {"parts": [[2, "string"]], "unique": False})(c),
                c.d.index_alter(c.sid("test"), "x", {"id": 7, "unique": True}))),
    ("box.schema.user.create('repl')", lambda c: c.d.user_create("repl")),
    ("box.schema.user.create('x', {password=1})",
     lambda c: c.d.user_create("x", {"password": 1})),
    ("box.schema.user.grant('nobody', 'read', 'universe')",
     lambda c: c.d.user_grant("nobody", "read", "universe")),
    ("box.schema.user.grant('repl', 'replication')",
     lambda c: c.d.user_grant("repl", "replication")),
    ("box.schema.user.grant('repl', 'read', 'space', 'test') "
     "box.schema.user.grant('repl', 'read', 'space', 'test')",
     lambda c: (c.d.user_grant("repl", "read", "space", "test"),
                c.d.user_grant("repl", "read", "space", "test"))),
    ("box.schema.user.grant('repl', 'read', 'universe')",
     lambda c: c.d.user_grant("repl", "read", "universe")),
    ("box.schema.user.grant('repl', 'session', 'universe')",
     lambda c: c.d.user_grant("repl", "session", "universe")),
    ("box.schema.user.grant('repl', 'foo', 'space', 'test')",
     lambda c: c.d.user_grant("repl", "foo", "space", "test")),
    ("box.schema.user.grant('repl', 'read', 'bogus', 'x')",
     lambda c: c.d.user_grant("repl", "read", "bogus", "x")),
    ("box.schema.user.grant('repl', 'read', 'space', 'nope')",
     lambda c: c.d.user_grant("repl", "read", "space", "nope")),
    ("box.schema.user.grant('repl', 'execute', 'function', 'nope')",
     lambda c: c.d.user_grant("repl", "execute", "function", "nope")),
    ("box.schema.user.grant('repl', 'nope_role')", lambda c: c.d.user_grant("repl", "nope_role")),
    ("box.schema.user.grant('repl', 'read', 'sequence', 'nope')",
     lambda c: c.d.user_grant("repl", "read", "sequence", "nope")),
    ("box.schema.user.grant('repl', 'read', 'role', 'r1')",
     lambda c: c.d.user_grant("repl", "read", "role", "r1")),
    ("box.schema.user.grant('repl', 'session', 'space', 'test')",
     lambda c: c.d.user_grant("repl", "session", "space", "test")),
    ("box.schema.user.grant('repl', 'execute', 'user', 'u2')",
     lambda c: c.d.user_grant("repl", "execute", "user", "u2")),
    ("box.schema.user.grant('repl', 'alter', 'user', 'r1')",
     lambda c: c.d.user_grant("repl", "alter", "user", "r1")),
    ("box.schema.user.grant('admin', 'read', 'universe')",
     lambda c: c.d.user_grant("admin", "read", "universe")),
    ("box.schema.user.revoke('admin', 'read', 'universe')",
     lambda c: c.d.user_revoke("admin", "read", "universe")),
    ("box.schema.user.revoke('repl', 'write', 'space', 'test')",
     lambda c: c.d.user_revoke("repl", "write", "space", "test")),
    ("box.schema.user.revoke('repl', 'r1')", lambda c: c.d.user_revoke("repl", "r1")),
    ("box.schema.user.revoke('repl', 'write', 'universe')",
     lambda c: c.d.user_revoke("repl", "write", "universe")),
    ("box.schema.role.grant('r1', 'session', 'universe')",
     lambda c: c.d.role_grant("r1", "session", "universe")),
    ("box.schema.role.grant('nope', 'read', 'universe')",
     lambda c: c.d.role_grant("nope", "read", "universe")),
    ("box.schema.role.grant('r1', 'r2') box.schema.role.grant('r2', 'r1')",
     lambda c: (c.d.role_grant("r1", "r2"), c.d.role_grant("r2", "r1"))),
    ("box.schema.role.grant('r1', 'r1')", lambda c: c.d.role_grant("r1", "r1")),
    ("box.schema.user.drop('admin')", lambda c: c.d.user_drop("admin")),
    ("box.schema.user.drop('nobody')", lambda c: c.d.user_drop("nobody")),
    ("box.schema.user.drop('r1')", lambda c: c.d.user_drop("r1")),
    ("box.schema.role.drop('super')", lambda c: c.d.role_drop("super")),
    ("box.schema.role.drop('public')", lambda c: c.d.role_drop("public")),
    ("box.schema.role.drop('repl')", lambda c: c.d.role_drop("repl")),
    ("box.schema.role.create('repl')", lambda c: c.d.role_create("repl")),
    ("box.schema.func.create('f')", lambda c: c.d.func_create("f")),
    ("box.schema.func.create('g', {language='foo'})",
     lambda c: c.d.func_create("g", {"language": "foo"})),
    ("box.schema.func.create('g', {setuid=1})", lambda c: c.d.func_create("g", {"setuid": 1})),
    ("box.schema.func.drop('nope')", lambda c: c.d.func_drop("nope")),
    ("box.schema.func.drop('TRIM')", lambda c: c.d.func_drop("TRIM")),
    ("box.schema.space.drop(9999)", lambda c: c.d.space_drop(9999)),
    ("box.schema.space.drop('x')", lambda c: c.d.space_drop("x")),
    ("box.space._space:truncate()", lambda c: c.d.space_truncate(280)),
    ("box.schema.user.passwd('guest', 'x')", lambda c: c.d.user_passwd("guest", "x")),
    ("box.schema.user.passwd('nobody', 'x')", lambda c: c.d.user_passwd("nobody", "x")),
    ("box.space.test:rename('sync')", lambda c: c.d.space_rename(c.sid("test"), "sync")),
    ("box.space.test:rename('')", lambda c: c.d.space_rename(c.sid("test"), "")),
    ("box.space.test:create_index('sk', {parts={2, 'string'}}) box.space.test.index.pk:drop()",
     lambda c: (idx("test", "sk", {"parts": [2, "string"]})(c), c.d.index_drop(c.sid("test"), 0))),
    ("box.space._space.index.primary:drop()", lambda c: c.d.index_drop(280, 0)),
    ("box.space.test:format({{'id','string'}})",
     lambda c: c.d.space_format(c.sid("test"), [["id", "string"]])),
    ("box.space.test:insert{1, 'a'} box.space.test:format({{'id','unsigned'},{'val','unsigned'}})",
     lambda c: (c.e.space("test").insert([1, "a"]),
                c.d.space_format(c.sid("test"), [["id", "unsigned"], ["val", "unsigned"]]))),
    ("box.space.test:create_index('u3', {parts={{2, 'unsigned'}}})",
     idx("test", "u3", {"parts": [[2, "unsigned"]]})),
    ("box.schema.space.create('x', {format={'a', {'b', 'unsigned'}, {name='c'}}}) "
     "box.space.x:create_index('pk') box.space.x:create_index('i2', {parts={'c'}})",
     lambda c: (c.d.space_create("x", {"format": ["a", ["b", "unsigned"], {"name": "c"}]}),
                idx("x", "pk")(c), idx("x", "i2", {"parts": ["c"]})(c))),
    ("box.begin() box.space.test:insert{2, 'b'} "
     "local ok, e = pcall(box.space.test.create_index, box.space.test, 'late', {parts={2,'string'}}) "
     "box.rollback() if not ok then error(e) end",
     lambda c: c.e.txns.atomic(lambda: (c.e.space("test").insert([2, "b"]),
                                        idx("test", "late", {"parts": [2, "string"]})(c)))),
    # access: as u2 (no grants but public, session, usage)
    ("box.session.su('u2', box.schema.space.create, 'y')",
     as_user("u2", lambda c: c.d.space_create("y"))),
    ("box.schema.user.grant('u2', 'read,write', 'space', '_schema') "
     "box.session.su('u2', box.schema.space.create, 'y')",
     lambda c: (c.d.user_grant("u2", "read,write", "space", "_schema"),
                as_user("u2", lambda c: c.d.space_create("y"))(c))),
    ("box.schema.user.grant('u2', 'read,write', 'space', '_space') "
     "box.session.su('u2', box.schema.space.create, 'y')",
     lambda c: (c.d.user_grant("u2", "read,write", "space", "_space"),
                as_user("u2", lambda c: c.d.space_create("y"))(c))),
    ("box.schema.user.grant('u2', 'create', 'space') "
     "box.session.su('u2', box.schema.space.create, 'y') "
     "box.session.su('u2', function() box.space.y:create_index('pk') end)",
     lambda c: (c.d.user_grant("u2", "create", "space"),
                as_user("u2", lambda c: c.d.space_create("y"))(c),
                as_user("u2", idx("y", "pk"))(c))),
    ("box.session.su('u2', function() box.space.test:drop() end)",
     as_user("u2", lambda c: c.d.space_drop(c.sid("test"), "test"))),
    ("box.session.su('u2', function() box.schema.user.grant('repl', 'read', 'space', 'y') end)",
     as_user("u2", lambda c: c.d.user_grant("repl", "read", "space", "y"))),
    ("box.session.su('u2', function() box.schema.user.create('u3') end)",
     as_user("u2", lambda c: c.d.user_create("u3"))),
    ("box.session.su('u2', function() box.schema.func.create('h') end)",
     as_user("u2", lambda c: c.d.func_create("h"))),
    ("box.session.su('u2', function() box.space.test:truncate() end)",
     as_user("u2", lambda c: c.d.space_truncate(c.sid("test")))),
    ("box.session.su('u2', function() box.space.test:select() end)",
     as_user("u2", lambda c: c.access.check_space(c.uid("u2"), c.e.space("test"), Priv.R))),
    ("box.session.su('guest', function() box.space.test:replace{1} end)",
     as_user("guest", lambda c: c.access.check_space(0, c.e.space("test"), Priv.W))),
    ("box.session.su('u2', box.schema.user.drop, 'u2')", as_user("u2", lambda c: c.d.user_drop("u2"))),
    ("box.session.su('u2', box.schema.user.passwd, 'newpw')",
     as_user("u2", lambda c: c.d.user_passwd("newpw"))),
    ("box.schema.role.grant('r2', 'public') box.schema.user.grant('repl', 'read,write', 'space', "
     "'_priv') box.session.su('repl', box.schema.role.grant, 'r1', 'public') "
     "box.schema.user.drop('repl')",
     lambda c: (c.d.role_grant("r2", "public"),
                c.d.user_grant("repl", "read,write", "space", "_priv"),
                as_user("repl", lambda c: c.d.role_grant("r1", "public"))(c),
                c.d.user_drop("repl"))),
    ("box.schema.user.revoke('guest', 'public') box.schema.user.revoke('guest', 'public')",
     lambda c: (c.d.user_revoke("guest", "public"), c.d.user_revoke("guest", "public"))),
]


def outcome_lua(code: str) -> str:
    return ("do local ok, e = pcall(function() " + code + " end) "
            "if ok then print(json.encode({'OK'})) "
            "elseif type(e) == 'cdata' then print(json.encode({e.code, e.message})) "
            "else print(json.encode({'LUA', tostring(e)})) end end")


def outcome_py(fn, ctx) -> list:
    try:
        fn(ctx)
    except BoxError as err:
        return [int(err.code), err.message]
    return ["OK"]


def test_errors_equal_real_tarantool(tmp_path):
    body = "\n".join(lua for lua, _ in SETUP) + "\n" + \
        "\n".join(outcome_lua(lua) for lua, _ in ERRORS)
    expected = [json.loads(line) for line in run_lua(tmp_path, body).splitlines()]
    assert len(expected) == len(ERRORS)
    ctx = spindle(atomic=True, with_access=True)
    for _, step in SETUP:
        step(ctx)
    mismatches = []
    for (lua, fn), want in zip(ERRORS, expected):
        got = outcome_py(fn, ctx)
        if got != want:
            mismatches.append((lua, want, got))
    assert not mismatches, "\n".join(f"{lua}\n  real: {w}\n  ours: {g}" for lua, w, g in mismatches)
    refused = [w for w in expected if w != ["OK"]]
    assert len(refused) >= 60


# ------------------------------------------------------------------ access over IPROTO

SERVER = """
box.cfg{listen='127.0.0.1:0', log_level=1}
%s
io.stdout:write(tostring(box.info.listen), "\\n") io.stdout:flush()
"""

ACCESS_SETUP = [
    ("box.schema.space.create('test', {format={{'id','unsigned'}}})",
     lambda c: c.d.space_create("test", {"format": [["id", "unsigned"]]})),
    ("box.space.test:create_index('pk')", idx("test", "pk")),
    ("box.schema.func.create('f')", lambda c: c.d.func_create("f")),
    ("function f() return 1 end", lambda c: None),
    ("box.schema.user.create('u', {password='p'})", lambda c: c.d.user_create("u", {"password": "p"})),
    ("box.schema.user.create('nosess', {password='p'})",
     lambda c: c.d.user_create("nosess", {"password": "p"})),
    ("box.schema.user.revoke('nosess', 'session', 'universe')",
     lambda c: c.d.user_revoke("nosess", "session", "universe")),
    ("box.schema.user.create('nouse', {password='p'})",
     lambda c: c.d.user_create("nouse", {"password": "p"})),
    ("box.schema.user.revoke('nouse', 'usage', 'universe')",
     lambda c: c.d.user_revoke("nouse", "usage", "universe")),
    ("box.schema.role.create('rr')", lambda c: c.d.role_create("rr")),
    ("box.schema.role.grant('rr', 'read', 'space', 'test')",
     lambda c: c.d.role_grant("rr", "read", "space", "test")),
    ("box.schema.user.create('viarole', {password='p'})",
     lambda c: c.d.user_create("viarole", {"password": "p"})),
    ("box.schema.user.grant('viarole', 'rr')", lambda c: c.d.user_grant("viarole", "rr")),
]


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("access_server")
    (workdir / "server.lua").write_text(SERVER % "\n".join(lua for lua, _ in ACCESS_SETUP))
    proc = subprocess.Popen([tarantool_binary(), "server.lua"], cwd=workdir,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line, proc.stderr.read()
        host, port = line.rsplit(":", 1)
        yield host, int(port)
    finally:
        proc.kill()
        proc.wait()


def denied_over_iproto(server, user, password, action) -> str:
    host, port = server
    try:
        conn = tarantool.Connection(host, port, user=user, password=password,
                                    fetch_schema=False)
        try:
            action(conn)
        finally:
            conn.close()
    except tarantool.error.DatabaseError as err:
        while len(err.args) == 1 and isinstance(err.args[0], Exception):
            err = err.args[0]          # NetworkError wraps the AUTH reply's error
        return err.args[1]
    return "OK"


def join_as_guest(server) -> str:
    """A raw JOIN (no AUTH): the master needs read on universe."""
    with socket.create_connection(server, timeout=5) as sock:
        greeting = b""
        while len(greeting) < 128:
            greeting += sock.recv(128 - len(greeting))
        header = msgpack.packb({0x00: int(IprotoType.JOIN), 0x01: 1})
        body = msgpack.packb({0x24: str(uuid.uuid4())})
        sock.sendall(b"\xce" + (len(header) + len(body)).to_bytes(4, "big") + header + body)
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        items = []
        while len(items) < 3:
            unpacker.feed(sock.recv(4096))
            items.extend(unpacker)
        return items[2].get(0x31)


SELECT = lambda conn: conn._send_request(RequestSelect(conn, 512, 0, [], 0, 10, 0))  # noqa: E731
INSERT = lambda conn: conn._send_request(RequestInsert(conn, 512, [7]))  # noqa: E731
CALL = lambda conn: conn.call("f")  # noqa: E731
EVAL = lambda conn: conn.eval("return 1")  # noqa: E731


def test_access_denials_over_iproto_equal_real_tarantool(real_server):
    ctx = spindle(with_access=True)
    for _, step in ACCESS_SETUP:
        step(ctx)
    a, e, s = ctx.access, ctx.e, ctx.s
    test, f = e.space("test"), s.func_by_name("f")

    def ours(fn) -> str:
        try:
            fn()
        except BoxError as err:
            return err.message
        return "OK"
    uid = ctx.uid
    cases = [
        ((None, None, CALL), lambda: a.check_function(0, f)),
        ((None, None, EVAL), lambda: a.check_universe(0, Priv.X)),
        ((None, None, SELECT), lambda: a.check_space(0, test, Priv.R)),
        ((None, None, INSERT), lambda: a.check_space(0, test, Priv.W)),
        (("u", "p", SELECT), lambda: a.check_space(uid("u"), test, Priv.R)),
        (("u", "p", INSERT), lambda: a.check_space(uid("u"), test, Priv.W)),
        (("u", "p", CALL), lambda: a.check_function(uid("u"), f)),
        (("nosess", "p", lambda conn: conn.ping()), lambda: a.check_session(uid("nosess"))),
        (("nouse", "p", SELECT), lambda: a.check_space(uid("nouse"), test, Priv.R)),
        (("nouse", "p", CALL), lambda: a.check_function(uid("nouse"), f)),
        (("viarole", "p", SELECT), lambda: a.check_space(uid("viarole"), test, Priv.R)),
        (("viarole", "p", INSERT), lambda: a.check_space(uid("viarole"), test, Priv.W)),
    ]
    for (user, password, action), check in cases:
        assert denied_over_iproto(real_server, user, password, action) == ours(check), user
    assert join_as_guest(real_server) == ours(lambda: a.check_universe(0, Priv.R)) == \
        "Read access to universe '' is denied for user 'guest'"


def test_failed_call_rows_equal_real_tarantool(tmp_path):
    """2.6.0 keeps the statements of a failed call that came before the failure (each
    committed on its own): atomic=False does the same, atomic=True keeps none."""
    calls = [
        ("pcall(box.schema.space.create, 'x', {format={{'a', 'foo'}}})",
         lambda c: c.d.space_create("x", {"format": [["a", "foo"]]})),
        ("pcall(box.schema.space.drop, 4242)", lambda c: c.d.space_drop(4242)),
        ("pcall(box.schema.user.grant, 'guest', 'read', 'universe') "
         "pcall(box.schema.user.revoke, 'guest', 'read', 'space', '_space')",
         lambda c: (c.d.user_grant("guest", "read", "universe"),
                    outcome_py(lambda c: c.d.user_revoke("guest", "read", "space", "_space"), c))),
    ]
    run_lua(tmp_path, "\n".join(lua for lua, _ in calls))
    theirs = oracle_transactions(tmp_path)
    for atomic in (False, True):
        ctx = spindle(atomic=atomic)
        for _, step in calls:
            outcome_py(step, ctx)
        ours = [[row_key(r) for r in tx] for tx in ctx.txns]
        if atomic:
            assert ours == [[row for tx in theirs[-1:] for row in tx]]
        else:
            assert ours == theirs
    assert theirs[0] == [("UPDATE", 272, 0, ["max_id"], None, [["+", 2, 1]], 0)]
    assert [tx[0][0] for tx in theirs[1:4]] == ["DELETE"] * 3
