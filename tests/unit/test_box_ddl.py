"""Ddl: box.schema.* as DML on the system spaces (rows, ids, errors, transactions).

The exact rows and messages are pinned against the real 2.6.0 binary in
tests/interop/test_ddl_oracle.py; these tests pin the behaviour without it.
"""
from __future__ import annotations

import pytest

from spindle.core.box.access import Access, Priv
from spindle.core.box.ddl import Ddl
from spindle.core.box.ddl_users import check_options, privilege_check, tobit
from spindle.core.box.schema import Schema, load_bootstrap_rows
from spindle.core.box.txn import Engine
from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import decode_dml_body


class Box:
    def __init__(self, *, atomic=True, with_access=False):
        self.txns: list[list] = []
        self.engine = Engine(journal=lambda rows: self.txns.append(list(rows)))
        self.schema = Schema(self.engine)
        rows = load_bootstrap_rows()
        self.schema.create_system_spaces(rows)
        for space_id, tup in rows:
            self.engine.space(space_id).replace(tup)
        self.txns.clear()
        self.user = 1
        self.access = Access(self.schema) if with_access else None
        self.ddl = Ddl(self.engine, self.schema, lambda: self.user, access=self.access,
                       atomic=atomic, clock=lambda: 0.0)

    def rows(self) -> list[tuple]:
        out = []
        for tx in self.txns:
            for row in tx:
                req = decode_dml_body(row.body, row.type)
                payload = req.tuple if req.tuple is not None else req.key
                out.append((IprotoType(row.type).name, req.space_id, payload, req.ops))
        return out

    def take(self) -> list[tuple]:
        rows = self.rows()
        self.txns.clear()
        return rows

    def uid(self, name):
        return self.schema.user_by_name(name).id


@pytest.fixture
def box():
    return Box()


def code_of(fn) -> tuple[int, str]:
    with pytest.raises(ClientError) as info:
        fn()
    return info.value.code, info.value.message


# ------------------------------------------------------------------- spaces

def test_space_create_bumps_max_id_then_inserts(box):
    space = box.ddl.space_create("test", {"format": [{"name": "id", "type": "unsigned"},
                                                     ["val", "string"]]})
    assert space.id == 512 and box.schema.max_id == 512
    assert box.take() == [
        ("UPDATE", 272, ["max_id"], [["+", 2, 1]]),
        ("INSERT", 280, [512, 1, "test", "memtx", 0, {},
                         [{"name": "id", "type": "unsigned"}, {"name": "val", "type": "string"}]],
         None),
    ]
    assert box.ddl.space_create("second").id == 513


@pytest.mark.parametrize("options, flags", [
    ({"is_sync": True}, {"is_sync": True}),
    ({"is_sync": False}, {"is_sync": False}),
    ({"is_local": True}, {"group_id": 1}),
    ({"temporary": True}, {"temporary": True}),
    ({"is_local": True, "temporary": False}, {"group_id": 1}),
])
def test_space_flags_as_stored(box, options, flags):
    space = box.ddl.space_create("s", options)
    assert box.take()[-1][2][5] == flags
    assert space.is_sync == bool(flags.get("is_sync")) and space.is_local == ("group_id" in flags)


def test_explicit_id_owner_and_if_not_exists(box):
    box.ddl.user_create("u")
    box.take()
    space = box.ddl.space_create("x", {"id": 9000, "user": "u", "field_count": 2})
    assert box.take() == [("INSERT", 280, [9000, 32, "x", "memtx", 2, {}, []], None)]
    assert box.ddl.space_create("x", {"if_not_exists": True}) is space
    assert box.take() == []


@pytest.mark.parametrize("fmt, stored", [
    (["a"], [{"name": "a", "type": "any"}]),
    ([["a", "string"]], [{"name": "a", "type": "string"}]),
    ([{1: "a", 2: "string", "is_nullable": True}],
     [{"name": "a", "type": "string", "is_nullable": True}]),
    ([{"name": "a", 1: "x"}], [{"name": "a", "type": "x"}]),
    ([{1: "a", 2: "string", "collation": "unicode_ci"}],
     [{"name": "a", "type": "string", "collation": 2}]),
])
def test_update_format(box, fmt, stored):
    assert box.ddl.update_format(fmt) == stored


@pytest.mark.parametrize("call, code, message", [
    (lambda d: d.space_create(1), ErrorCode.ER_ILLEGAL_PARAMS,
     "Illegal parameters, name should be a string"),
    (lambda d: d.space_create("x", {"foo": 1}), ErrorCode.ER_ILLEGAL_PARAMS,
     "Illegal parameters, unexpected option 'foo'"),
    (lambda d: d.space_create("x", {"user": 1.5j}), ErrorCode.ER_ILLEGAL_PARAMS,
     "Illegal parameters, options parameter 'user' should be one of types: string, number"),
    (lambda d: d.space_create("x", {"format": [["a", "foo"]]}), ErrorCode.ER_CREATE_SPACE,
     "Failed to create space 'x': field 1 has unknown field type"),
    (lambda d: d.space_create("x", {"is_local": True, "is_sync": True}), ErrorCode.ER_CREATE_SPACE,
     "Failed to create space 'x': local space can't be synchronous"),
    (lambda d: d.space_create("x", {"engine": "foo"}), ErrorCode.ER_NO_SUCH_ENGINE,
     "Space engine 'foo' does not exist"),
    (lambda d: d.space_create("a\x01b"), ErrorCode.ER_IDENTIFIER,
     "Invalid identifier 'a\x01b' (expected printable symbols only or it is too long)"),
    (lambda d: d.space_create("_space"), ErrorCode.ER_SPACE_EXISTS, "Space '_space' already exists"),
    (lambda d: d.space_drop(9999), ErrorCode.ER_NO_SUCH_SPACE, "Space '#9999' does not exist"),
    (lambda d: d.space_truncate(280), ErrorCode.ER_TRUNCATE_SYSTEM_SPACE,
     "Can't truncate a system space, space '_space'"),
])
def test_space_errors(box, call, code, message):
    assert code_of(lambda: call(box.ddl)) == (code, message)


def test_failed_call_leaves_nothing_in_atomic_mode(box):
    code_of(lambda: box.ddl.space_create("x", {"format": [["a", "foo"]]}))
    assert box.txns == [] and box.schema.max_id == 511


def test_failed_call_keeps_earlier_statements_without_atomic():
    box = Box(atomic=False)                        # 2.6.0: each statement commits
    code_of(lambda: box.ddl.space_create("x", {"format": [["a", "foo"]]}))
    assert box.rows() == [("UPDATE", 272, ["max_id"], [["+", 2, 1]])]
    assert box.schema.max_id == 512


def test_nested_in_callers_transaction(box):
    txns = box.engine.txns
    txns.begin()
    box.ddl.space_create("a")
    box.ddl.user_create("u")
    txns.rollback()
    assert box.txns == [] and box.engine.find_space("a") is None
    assert box.schema.user_by_name("u") is None
    txns.begin()
    box.ddl.space_create("a")
    box.ddl.user_create("u")
    txns.commit()
    assert len(box.txns) == 1 and len(box.txns[0]) == 6


def test_rename_format_truncate_rows(box):
    space = box.ddl.space_create("t", {"format": [["id", "unsigned"]]})
    box.ddl.index_create(space.id, "pk")
    space.insert([1])
    box.take()
    box.ddl.space_truncate(space.id)
    box.ddl.space_rename(space.id, "t2")
    box.ddl.space_format(space.id, [["id", "unsigned"], ["v", "string", ]])
    assert box.take() == [
        ("UPSERT", 330, [512, 1], [["+", 1, 1]]),
        ("UPDATE", 280, [512], [["=", 3, "t2"]]),
        ("UPDATE", 280, [512], [["=", 7, [{"name": "id", "type": "unsigned"},
                                          {"name": "v", "type": "string"}]]]),
    ]
    assert len(space) == 0 and space.name == "t2"
    assert box.ddl.space_format(space.id)[1] == {"name": "v", "type": "string"}


def test_truncate_of_temporary_or_local_space_is_a_local_row(box):
    for name, opts in (("tmp", {"temporary": True}), ("loc", {"is_local": True}),
                       ("plain", {})):
        space = box.ddl.space_create(name, opts)
        box.ddl.index_create(space.id, "pk")
        box.txns.clear()
        box.ddl.space_truncate(space.id)
        assert box.txns[0][0].group_id == (GroupId.DEFAULT if name == "plain" else GroupId.LOCAL)


def test_space_drop_order(box):
    space = box.ddl.space_create("t")
    box.ddl.index_create(space.id, "pk")
    box.ddl.index_create(space.id, "sk", {"parts": [2, "string"]})
    box.ddl.user_create("u")
    box.ddl.user_grant("u", "read", "space", "t")
    box.take()
    box.ddl.space_drop(space.id)
    assert box.take() == [
        ("DELETE", 340, [512], None), ("DELETE", 288, [512, 1], None),
        ("DELETE", 288, [512, 0], None), ("DELETE", 312, [32, "space", 512], None),
        ("DELETE", 330, [512], None), ("DELETE", 280, [512], None),
    ]
    assert box.engine.find_space("t") is None
    box.ddl.space_drop(space.id, "t", {"if_exists": True})


# ------------------------------------------------------------------- indexes

@pytest.mark.parametrize("options, iid, parts, opts", [
    (None, 0, [[0, "unsigned"]], {"unique": True}),
    ({"parts": [1, "unsigned", 2, "string"]}, 0, [[0, "unsigned"], [1, "string"]], {"unique": True}),
    ({"parts": [[1, "uint"], [2, "STR"]], "type": "hash"}, 0,
     [[0, "unsigned"], [1, "string"]], {"unique": True}),
    ({"parts": [{"field": 2, "type": "string", "collation": "unicode_ci"}]}, 0,
     [{"field": 1, "type": "string", "collation": 2}], {"unique": True}),
    ({"parts": [{1: 2, 2: "string", "is_nullable": True}], "unique": False, "id": 5}, 5,
     [{"field": 1, "type": "string", "is_nullable": True}], {"unique": False}),
    ({"parts": ["name"]}, 0, [[1, "string"]], {"unique": True}),
    ({"parts": [{"field": "n"}], "id": 6, "unique": False}, 6,
     [{"field": 2, "type": "integer", "is_nullable": True}], {"unique": False}),
    ({"parts": [[4]]}, 0, [[3, "scalar"]], {"unique": True}),
])
def test_index_parts_forms(box, options, iid, parts, opts):
    space = box.ddl.space_create("t", {"format": [["id", "unsigned"], ["name", "string"],
                                                  {1: "n", 2: "integer", "is_nullable": True}]})
    if iid:
        box.ddl.index_create(space.id, "pk")
    box.take()
    box.ddl.index_create(space.id, "i", options)
    assert box.take() == [("INSERT", 288, [512, iid, "i", (options or {}).get("type", "tree"),
                                           opts, parts], None)]


def test_index_default_parts_follow_format_and_ids_increase(box):
    space = box.ddl.space_create("t", {"format": [["k", "string"]]})
    box.ddl.index_create(space.id, "pk")
    box.ddl.index_create(space.id, "second", {"parts": [1, "string"], "unique": False})
    rows = box.take()[-2:]
    assert rows[0][2][1:] == [0, "pk", "tree", {"unique": True}, [[0, "string"]]]
    assert rows[1][2][1] == 1
    assert box.ddl.index_create(space.id, "pk", {"if_not_exists": True}) is space.index(0)
    assert code_of(lambda: box.ddl.index_create(space.id, "pk")) == \
        (ErrorCode.ER_INDEX_EXISTS, "Index 'pk' already exists")


def test_index_rename_alter_drop(box):
    space = box.ddl.space_create("t")
    box.ddl.index_create(space.id, "pk")
    box.ddl.index_create(space.id, "sk", {"parts": [{1: 2, 2: "string", "is_nullable": True}],
                                          "unique": False})
    box.take()
    box.ddl.index_rename(space.id, 1, "sk2")
    box.ddl.index_alter(space.id, "sk2", {"unique": True})
    box.ddl.index_alter(space.id, 1, {"parts": [[2, "string"]]})
    box.ddl.index_drop(space.id, 1)
    assert box.take() == [
        ("UPDATE", 288, [512, 1], [["=", 3, "sk2"]]),
        ("REPLACE", 288, [512, 1, "sk2", "tree", {"unique": True},
                          [{"field": 1, "type": "string", "is_nullable": True}]], None),
        ("REPLACE", 288, [512, 1, "sk2", "tree", {"unique": True}, [[1, "string"]]], None),
        ("DELETE", 288, [512, 1], None),
    ]
    assert list(space.indexes) == [0]


def test_index_build_over_data_must_be_first_in_transaction(box):
    space = box.ddl.space_create("t")
    box.ddl.index_create(space.id, "pk")
    space.insert([1, "a"])
    txns = box.engine.txns
    txns.begin()
    space.insert([2, "b"])
    assert code_of(lambda: box.ddl.index_create(space.id, "sk", {"parts": [2, "string"]})) == \
        (ErrorCode.ER_MULTISTATEMENT_TRANSACTION,
         "Can not perform index build in a multi-statement transaction")
    txns.rollback()
    box.ddl.index_create(space.id, "sk", {"parts": [2, "string"]})
    assert space.index("sk").get(["a"]) == (1, "a")


@pytest.mark.parametrize("options, message", [
    ({"parts": [0, "unsigned"]}, "Illegal parameters, invalid index parts: field_no must be one-based"),
    ({"parts": []}, "Illegal parameters, options.parts must have at least one part"),
    ({"parts": [["nope"]]}, "Illegal parameters, options.parts[1]: field was not found by name 'nope'"),
    ({"parts": [{1: 1, "collation": "zz"}]},
     "Illegal parameters, options.parts[1]: collation was not found by name 'zz'"),
    ({"type": "bogus"}, "Unsupported index type supplied for index 'i' in space 't'"),
    ({"parts": [[1, "foo"]]},
     "Wrong index parts: unknown field type; expected field1 id (number), field1 type (string), ..."),
    ({"sequence": True, "id": 3}, "Can't create or modify index 'i' in space 't': sequence cannot "
     "be used with a secondary key"),
])
def test_index_errors(box, options, message):
    space = box.ddl.space_create("t")
    assert code_of(lambda: box.ddl.index_create(space.id, "i", options))[1] == message


# ------------------------------------------------------------------- users

def test_user_create_rows_and_ids(box):
    assert box.ddl.user_create("repl", {"password": "secret"}) == 32
    assert box.take() == [
        ("INSERT", 304, [32, 1, "repl", "user", {"chap-sha1": "FOZVZ6vbUTXQz9mnCzAywXmknuc="}], None),
        ("REPLACE", 312, [1, 32, "role", 2, 4], None),
        ("REPLACE", 312, [1, 32, "user", 32, 128], None),
        ("REPLACE", 312, [1, 32, "universe", 0, 24], None),
    ]
    assert box.ddl.role_create("r") == 33
    assert box.take() == [("INSERT", 304, [33, 1, "r", "role", {}], None)]
    assert box.ddl.user_create("repl", {"if_not_exists": True}) is None
    assert code_of(lambda: box.ddl.user_create("r")) == \
        (ErrorCode.ER_USER_EXISTS, "User 'r' already exists")
    assert box.ddl.user_exists("repl") and not box.ddl.user_exists("r")
    assert box.ddl.role_exists("r")


def test_grantor_of_first_grants_is_the_creator(box):
    box.ddl.user_create("boss")
    box.ddl.user_grant("boss", "read,write", "universe")
    box.ddl.user_grant("boss", "create", "user")
    box.take()
    box.user = box.uid("boss")
    box.ddl.user_create("minion")
    assert [r[2][0] for r in box.take()[1:]] == [32, 32, 1]
    assert box.schema.users[33].owner == 32


def test_user_max(box):
    for n in range(27):
        box.ddl.role_create(f"r{n}")
    assert code_of(lambda: box.ddl.role_create("one_more")) == \
        (ErrorCode.ER_USER_MAX, "A limit on the total number of users has been reached: 32")


def test_passwd(box):
    box.ddl.user_create("u")
    box.take()
    box.ddl.user_passwd("u", "pw")
    assert box.take() == [("UPDATE", 304, [32], [["=", 5, {"chap-sha1":
                                                           "2CGAn2gaQKbjebUNBGPvriC90SI="}]])]
    box.user = 32
    box.ddl.user_passwd("own")                       # the session user's own password
    assert box.take()[0][2] == [32]
    box.user = 1
    assert code_of(lambda: box.ddl.user_passwd("guest", "x")) == \
        (ErrorCode.ER_GUEST_USER_PASSWORD, "Setting password for guest user has no effect")


@pytest.mark.parametrize("args, row", [
    (("read", "space", "t"), [1, 32, "space", 512, 1]),
    (("read,write", "space", "t"), [1, 32, "space", 512, 3]),
    (("READ", "space"), [1, 32, "space", "", 1]),
    (("execute", "function", "box.schema.user.info"), [1, 32, "function", 1, 4]),
    (("create,drop,alter", "universe"), [1, 32, "universe", 0, 32 | 64 | 128]),
    (("replication",), [1, 32, "role", 3, 4]),
    (("execute", "role", "super"), [1, 32, "role", 31, 4]),
    ((2, "space", 512), [1, 32, "space", 512, 2]),
    (("alter", "user", "u"), [1, 32, "user", 32, 128]),
])
def test_grant_rows(box, args, row):
    box.ddl.space_create("t")
    box.ddl.user_create("u")
    if row[2] in ("universe", "user"):
        box.ddl.user_revoke("u", "session,usage" if row[2] == "universe" else "alter", row[2],
                            *(("u",) if row[2] == "user" else ()))
    box.take()
    box.ddl.user_grant("u", *args)
    got = box.take()
    assert got[-1] == ("REPLACE", 312, row, None)


def test_grant_adds_bits_and_revoke_removes_them(box):
    box.ddl.space_create("t")
    box.ddl.user_create("u")
    box.take()
    box.ddl.user_grant("u", "read", "space", "t")
    box.ddl.user_grant("u", "write", "space", "t")
    box.ddl.user_grant("u", "read", "space", "t", {"if_not_exists": True})
    box.ddl.user_revoke("u", "read", "space", "t")
    box.ddl.user_revoke("u", "read", "space", "t", {"if_exists": True})
    box.ddl.user_revoke("u", "write", "space", "t")
    assert box.take() == [
        ("REPLACE", 312, [1, 32, "space", 512, 1], None),
        ("REPLACE", 312, [1, 32, "space", 512, 3], None),
        ("REPLACE", 312, [1, 32, "space", 512, 2], None),
        ("DELETE", 312, [32, "space", 512], None),
    ]


@pytest.mark.parametrize("call, code, message", [
    (lambda d: d.user_grant("nobody", "read", "universe"), ErrorCode.ER_NO_SUCH_USER,
     "User 'nobody' is not found"),
    (lambda d: d.user_grant("u", "public"), ErrorCode.ER_ROLE_GRANTED,
     "User 'u' already has role 'public'"),
    (lambda d: d.user_grant("u", "session", "universe"), ErrorCode.ER_PRIV_GRANTED,
     "User 'u' already has session access on universe"),
    (lambda d: d.user_grant("u", "alter", "user", "u"), ErrorCode.ER_PRIV_GRANTED,
     "User 'u' already has alter access on user 'u'"),
    (lambda d: d.user_grant("u", "foo", "space", "t"), ErrorCode.ER_UNSUPPORTED_PRIV,
     "Unsupported space privilege 'foo'"),
    (lambda d: d.user_grant("u", "read", "thing", "t"), ErrorCode.ER_UNKNOWN_SCHEMA_OBJECT,
     "Unknown object type 'thing'"),
    (lambda d: d.user_grant("u", "read", "space", "nope"), ErrorCode.ER_NO_SUCH_SPACE,
     "Space 'nope' does not exist"),
    (lambda d: d.user_grant("u", "nope"), ErrorCode.ER_NO_SUCH_ROLE, "Role 'nope' is not found"),
    (lambda d: d.user_revoke("u", "replication"), ErrorCode.ER_ROLE_NOT_GRANTED,
     "User 'u' does not have role 'replication'"),
    (lambda d: d.user_revoke("u", "read", "space", "t"), ErrorCode.ER_PRIV_NOT_GRANTED,
     "User 'u' does not have read access on space 't'"),
    (lambda d: d.user_revoke("u", "read", "universe"), ErrorCode.ER_PRIV_NOT_GRANTED,
     "User 'u' does not have read access on universe ''"),
    (lambda d: d.role_grant("r", "usage", "universe"), ErrorCode.ER_GRANT,
     "Incorrect grant arguments: system privilege can not be granted to role"),
    (lambda d: d.role_grant("r", "r"), ErrorCode.ER_ROLE_LOOP,
     "Granting role 'r' to role 'r' would create a loop"),
    (lambda d: d.user_grant("admin", "read", "universe"), ErrorCode.ER_FIELD_TYPE,
     "Tuple field 5 type does not match one required by operation: expected unsigned"),
    (lambda d: d.user_drop("admin"), ErrorCode.ER_DROP_USER,
     "Failed to drop user or role 'admin': the user or the role is a system"),
    (lambda d: d.role_drop("super"), ErrorCode.ER_DROP_USER,
     "Failed to drop user or role 'super': the user or the role is a system"),
    (lambda d: d.user_drop("r"), ErrorCode.ER_NO_SUCH_USER, "User 'r' is not found"),
    (lambda d: d.role_create("u"), ErrorCode.ER_ROLE_EXISTS, "Role 'u' already exists"),
])
def test_grant_and_user_errors(box, call, code, message):
    box.ddl.space_create("t")
    box.ddl.user_create("u")
    box.ddl.role_create("r")
    box.take()
    assert code_of(lambda: call(box.ddl)) == (code, message)
    assert box.take() == []


def test_role_loop_through_a_chain(box):
    for name in ("a", "b", "c"):
        box.ddl.role_create(name)
    box.ddl.role_grant("a", "b")        # a has b
    box.ddl.role_grant("b", "c")        # b has c
    assert code_of(lambda: box.ddl.role_grant("c", "a")) == \
        (ErrorCode.ER_ROLE_LOOP, "Granting role 'a' to role 'c' would create a loop")


def test_user_drop_cascades(box):
    box.ddl.user_create("u")
    box.ddl.role_create("r")
    box.ddl.role_grant("r", "read", "universe")
    box.ddl.user_grant("u", "r")
    space = box.ddl.space_create("owned", {"user": "u"})
    box.ddl.index_create(space.id, "pk")
    box.user = 32
    box.ddl.func_create("uf")
    box.user = 1
    box.take()
    box.ddl.user_drop("u")
    assert box.take() == [
        ("DELETE", 340, [512], None), ("DELETE", 288, [512, 0], None),
        ("DELETE", 330, [512], None), ("DELETE", 280, [512], None),
        ("DELETE", 296, [68], None),
        ("DELETE", 312, [32, "universe", 0], None), ("DELETE", 312, [32, "role", 2], None),
        ("DELETE", 312, [32, "role", 33], None), ("DELETE", 312, [32, "user", 32], None),
        ("DELETE", 304, [32], None),
    ]
    assert box.schema.user_by_name("u") is None and box.engine.find_space("owned") is None
    box.ddl.role_drop("r")
    assert box.take() == [("DELETE", 312, [33, "universe", 0], None), ("DELETE", 304, [33], None)]


def test_user_who_granted_something_cannot_be_dropped(box):
    box.ddl.user_create("u")
    box.ddl.role_create("r")
    box.user = 32
    box.ddl.role_grant("r", "public")            # anyone may grant 'public'
    box.user = 1
    assert code_of(lambda: box.ddl.user_drop("u")) == \
        (ErrorCode.ER_DROP_USER, "Failed to drop user or role 'u': the user has objects")
    assert box.schema.user_by_name("u") is not None     # rolled back as a whole


def test_user_in_session_cannot_be_dropped(box):
    box.ddl.user_create("u")
    box.user = 32
    assert code_of(lambda: box.ddl.user_drop("u"))[1] == \
        "Failed to drop user or role 'u': the user is active in the current session"


# ------------------------------------------------------------------- functions

def test_func_create_and_drop(box):
    assert box.ddl.func_create("f", {"body": "function() end", "setuid": True}) == 68
    row = box.take()[0][2]
    assert row[:6] == [68, 1, "f", 1, "LUA", "function() end"]
    assert row[6:17] == ["function", [], "any", "none", "none", False, False, True, ["LUA"], {}, ""]
    assert len(row[17]) == 19 and row[17] == row[18]
    box.ddl.user_create("u")
    box.ddl.user_grant("u", "execute", "function", "f")
    box.take()
    box.ddl.func_drop("f")
    assert box.take() == [("DELETE", 312, [32, "function", 68], None), ("DELETE", 296, [68], None)]
    assert box.ddl.func_create("f", {"if_not_exists": True}) == 68
    box.ddl.func_drop("nope", {"if_exists": True})
    assert code_of(lambda: box.ddl.func_drop("TRIM")) == \
        (ErrorCode.ER_DROP_FUNCTION, "Can't drop function 1: function is SQL built-in")
    assert code_of(lambda: box.ddl.func_create("g", {"language": "cobol"})) == \
        (ErrorCode.ER_FUNCTION_LANGUAGE, "Unsupported language 'COBOL' specified for function 'g'")


# ------------------------------------------------------------------- access

def test_non_admin_needs_system_space_access_then_create():
    box = Box(with_access=True)
    box.ddl.user_create("u")
    box.user = 32
    assert code_of(lambda: box.ddl.space_create("y"))[1] == \
        "Write access to space '_schema' is denied for user 'u'"
    box.user = 1
    box.ddl.user_grant("u", "read,write", "space", "_schema")
    box.ddl.user_grant("u", "read,write", "space", "_space")
    box.user = 32
    assert code_of(lambda: box.ddl.space_create("y"))[1] == \
        "Create access to space 'y' is denied for user 'u'"
    assert box.schema.max_id == 511                       # the whole call rolled back
    box.user = 1
    box.ddl.user_grant("u", "create", "space")
    box.user = 32
    space = box.ddl.space_create("y")
    assert box.access.space_owner(space.id) == 32


# ------------------------------------------------------------------- helpers

def test_lua_helpers():
    assert tobit(0xFFFFFFFF) == -1 and tobit(24) == 24
    assert privilege_check("Read,Write", "space") == 3
    assert privilege_check(Priv.R | Priv.W, "sequence") == 3
    assert check_options([], {}) == {}
    assert check_options({"a": None}, {}) == {}
    with pytest.raises(ClientError, match="unexpected option '1'"):
        check_options(["x"], {})


def test_altering_the_primary_key_rebuilds_every_index():
    """2.6.0 lets index_alter change a primary key that has secondaries; every index
    is rebuilt (non-unique secondaries order by the primary key too), and a rollback
    restores the old set."""
    from spindle.core.box.schema import Schema, load_bootstrap_rows
    from spindle.core.box.txn import Engine
    engine = Engine()
    schema = Schema(engine)
    rows = load_bootstrap_rows()
    schema.create_system_spaces(rows)
    for space_id, tup in rows:
        engine.space(space_id).replace(tup)
    engine.space("_space").insert([512, 1, "t", "memtx", 0, {}, []])
    index = engine.space("_index")
    index.insert([512, 0, "pk", "tree", {"unique": True}, [[0, "unsigned"]]])
    index.insert([512, 1, "sk", "tree", {"unique": False}, [[1, "string"]]])
    space = engine.space("t")
    for i in range(1, 6):
        space.insert([i, "same", 10 - i])
    engine.txns.begin()
    index.replace([512, 0, "pk", "tree", {"unique": True}, [[2, "unsigned"]]])
    assert [t[0] for t in space.select()] == [5, 4, 3, 2, 1]          # by field 3 now
    assert [t[0] for t in space.index(1).select("same")] == [5, 4, 3, 2, 1]
    engine.txns.rollback()
    assert [t[0] for t in space.select()] == [1, 2, 3, 4, 5]
    assert [t[0] for t in space.index(1).select("same")] == [1, 2, 3, 4, 5]
