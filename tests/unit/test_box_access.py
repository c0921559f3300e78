"""Access: effective privileges from _priv/_user rows and 2.6.0's check texts.

The messages are compared with the real binary (over IPROTO and in-process) in
tests/interop/test_ddl_oracle.py.
"""
from __future__ import annotations

import pytest

from spindle.core.box.access import AccessDeniedError, Access, Priv, priv_name
from spindle.core.box.ddl import Ddl
from spindle.core.box.schema import Schema, load_bootstrap_rows
from spindle.core.box.txn import Engine
from spindle.core.iproto.errors import ClientError, ErrorCode

GUEST, ADMIN = 0, 1


@pytest.fixture
def box():
    engine = Engine()
    schema = Schema(engine)
    rows = load_bootstrap_rows()
    schema.create_system_spaces(rows)
    for space_id, tup in rows:
        engine.space(space_id).replace(tup)
    access = Access(schema)
    ddl = Ddl(engine, schema, lambda: ADMIN)
    space = ddl.space_create("test", {"format": [["id", "unsigned"]]})
    ddl.index_create(space.id, "pk")
    ddl.func_create("f")
    ddl.user_create("u", {"password": "p"})
    ddl.role_create("reader")
    ddl.role_grant("reader", "read", "space", "test")
    ddl.role_create("outer")
    ddl.role_grant("outer", "reader")
    ddl.user_create("v")
    ddl.user_grant("v", "outer")
    return engine, schema, access, ddl


def denied(fn) -> str:
    with pytest.raises(AccessDeniedError) as info:
        fn()
    err = info.value
    assert err.code == ErrorCode.ER_ACCESS_DENIED and err.type == "AccessDeniedError"
    return err.message


def test_priv_name_is_the_lowest_bit():
    assert priv_name(Priv.R) == "Read" and priv_name(Priv.W | Priv.U) == "Write"
    assert priv_name(Priv.A | Priv.U) == "Usage" and priv_name(0) == "Any"
    assert priv_name(Priv.REVOKE) == "Revoke"


def test_effective_privileges(box):
    engine, schema, access, ddl = box
    guest = access.effective(GUEST)
    assert guest.universal == Priv.S | Priv.U and 2 in guest.roles     # public
    assert guest.on("function", 1) == Priv.X                           # from public
    v = access.effective(schema.user_by_name("v").id)
    reader, outer = schema.user_by_name("reader").id, schema.user_by_name("outer").id
    assert v.roles == {2, outer, reader}
    assert v.on("space", 512) == Priv.R                                # two roles down
    assert access.effective(ADMIN).universal == 0xFFFFFFFF


def test_admin_and_owner(box):
    engine, schema, access, ddl = box
    test = engine.space("test")
    access.check_space(ADMIN, test, Priv.W)
    access.check_function(ADMIN, schema.func_by_name("f"))
    uid = schema.user_by_name("u").id
    ddl.user_grant("u", "read,write", "space", "_schema")
    ddl.user_grant("u", "read,write", "space", "_space")
    ddl.user_grant("u", "create", "space")
    as_u = Ddl(engine, schema, lambda: uid, access=access)
    mine = as_u.space_create("mine")
    access.check_space(uid, mine, Priv.R | Priv.W)                   # owner: no grant needed
    assert denied(lambda: access.check_space(uid, test, Priv.W)) == \
        "Write access to space 'test' is denied for user 'u'"


def test_check_messages(box):
    engine, schema, access, ddl = box
    test, f = engine.space("test"), schema.func_by_name("f")
    u = schema.user_by_name("u").id
    assert denied(lambda: access.check_space(GUEST, test, Priv.R)) == \
        "Read access to space 'test' is denied for user 'guest'"
    assert denied(lambda: access.check_space(u, test, Priv.W)) == \
        "Write access to space 'test' is denied for user 'u'"
    assert denied(lambda: access.check_function(GUEST, f)) == \
        "Execute access to function 'f' is denied for user 'guest'"
    assert denied(lambda: access.check_universe(GUEST, Priv.R)) == \
        "Read access to universe '' is denied for user 'guest'"
    assert denied(lambda: access.check_universe(GUEST, Priv.X)) == \
        "Execute access to universe '' is denied for user 'guest'"
    assert denied(lambda: access.check(GUEST, "space", test.id, Priv.W)) == \
        "Write access to space 'test' is denied for user 'guest'"
    assert denied(lambda: access.check(u, "function", f.id, Priv.X)) == \
        "Execute access to function 'f' is denied for user 'u'"
    assert denied(lambda: access.check_ddl(u, "x", 600, u, "space", Priv.C)) == \
        "Create access to space 'x' is denied for user 'u'"
    access.check_ddl(u, "x", 600, u, "space", Priv.A)                # owner may alter
    v = schema.user_by_name("v").id
    access.check_space(v, test, Priv.R)                              # through roles
    assert access.allowed(v, "space", test.id, Priv.R)
    assert not access.allowed(v, "space", test.id, Priv.W)


def test_usage_and_session(box):
    engine, schema, access, ddl = box
    ddl.user_revoke("u", "usage", "universe")
    u = schema.user_by_name("u").id
    test = engine.space("test")
    ddl.user_grant("u", "read", "space", "test")
    assert denied(lambda: access.check_space(u, test, Priv.R)) == \
        "Usage access to universe '' is denied for user 'u'"
    assert denied(lambda: access.check_function(u, schema.func_by_name("f"))) == \
        "Execute access to function 'f' is denied for user 'u'"
    access.check_session(u)
    ddl.user_revoke("u", "session", "universe")
    assert denied(lambda: access.check_session(u)) == \
        "Session access to universe '' is denied for user 'u'"
    with pytest.raises(ClientError, match="User '99' is not found"):
        access.check_space(99, test, Priv.R)


def test_universe_and_entity_grants_cover_objects(box):
    engine, schema, access, ddl = box
    u = schema.user_by_name("u").id
    test = engine.space("test")
    ddl.user_grant("u", "write", "space")                             # every space
    access.check_space(u, test, Priv.W)
    ddl.user_grant("u", "execute", "universe")
    access.check_function(u, schema.func_by_name("f"))
    access.check_universe(u, Priv.X)


def test_cache_follows_grants_and_rollbacks(box):
    engine, schema, access, ddl = box
    u = schema.user_by_name("u").id
    test = engine.space("test")
    assert not access.allowed(u, "space", test.id, Priv.R)
    ddl.user_grant("u", "reader")
    assert access.allowed(u, "space", test.id, Priv.R)
    engine.txns.begin()
    ddl.user_revoke("u", "reader")
    assert not access.allowed(u, "space", test.id, Priv.R)
    engine.txns.rollback()
    assert access.allowed(u, "space", test.id, Priv.R)
    ddl.role_revoke("reader", "read", "space", "test")
    assert not access.allowed(u, "space", test.id, Priv.R)


def test_grant_checks(box):
    engine, schema, access, ddl = box
    u = schema.user_by_name("u").id
    assert denied(lambda: access.check_grant(u, [u, 0, "universe", 0, 1], Priv.GRANT)) == \
        "Grant access to universe '' is denied for user 'u'"
    assert denied(lambda: access.check_grant(u, [u, 0, "space", 512, 1], Priv.GRANT)) == \
        "Grant access to space 'test' is denied for user 'u'"
    access.check_grant(u, [u, 0, "role", 2, Priv.X], Priv.GRANT)     # anyone grants public
    with pytest.raises(ClientError, match="Role 'u' is not found"):
        access.check_grant(ADMIN, [ADMIN, 0, "role", u, 4], Priv.GRANT)
    with pytest.raises(ClientError, match="the grant tuple has no privileges"):
        access.check_grant(ADMIN, [ADMIN, 0, "space", 512, 0], Priv.GRANT)
    outer = schema.user_by_name("outer").id
    reader = schema.user_by_name("reader").id
    with pytest.raises(ClientError, match="Granting role 'outer' to role 'reader'"):
        access.check_role_loop(reader, outer)


def test_sysview_filters(box):
    engine, schema, access, ddl = box
    u = schema.user_by_name("u").id
    space_row = engine.space(280).get([512])
    assert access.visible(ADMIN, 281, space_row)
    assert not access.visible(u, 281, space_row)
    ddl.user_grant("u", "read", "space", "test")
    assert access.visible(u, 281, space_row) and access.visible(u, 289, (512, 0))
    users = engine.space(304)
    assert access.visible(u, 305, users.get([u])) and access.visible(u, 305, users.get([2]))
    assert not access.visible(u, 305, users.get([ADMIN]))
    assert access.visible(u, 313, (1, u, "role", 2, 4))
    assert not access.visible(u, 313, (1, ADMIN, "universe", 0, 1))
    assert access.visible(GUEST, 297, engine.space(296).get([1]))    # public executes it
    assert not access.visible(u, 297, engine.space(296).get([68]))
