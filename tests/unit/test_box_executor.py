"""The box executor of core (core/net/box_executor.py) against a real Box and no Lua:
a started Box writing its WAL in a temporary directory, schema objects made with
core's Ddl, requests built from the packets a client sends.

What Lua adds (CALL, CALL_16, EVAL) is tested through the IPROTO server in
tests/integration/test_box_executor_inproc.py; here a box without Lua refuses them.
"""
from __future__ import annotations

import msgpack
import pytest

from spindle.core.box.cfg import defaults
from spindle.core.box.ddl import Ddl
from spindle.core.fiber import Scheduler
from spindle.core.instance.box import Box
from spindle.core.iproto.constants import IprotoKey, IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.net import requests as rq
from spindle.core.net.box_executor import (
    BALLOT_GC_VCLOCK, BALLOT_IS_LOADING, BALLOT_IS_RO, BALLOT_VCLOCK, BoxExecutor,
)
from spindle.core.net.protocol import decode_packet
from spindle.core.net.session import ADMIN, AuthUser, Session, SessionUser

K = IprotoKey
DATA = K.DATA


def request(kind: int, **body) -> rq.Request:
    """The typed request a client's packet decodes to (the server's own decoder)."""
    raw = rq.encode_request(kind, {getattr(K, name.upper()): value
                                   for name, value in body.items()}, sync=7)
    return rq.decode_request(decode_packet(raw[5:]))


def select(space_id: int, key=(), index_id: int = 0, limit: int = 100, offset: int = 0):
    return request(IprotoType.SELECT, space_id=space_id, index_id=index_id, limit=limit,
                   offset=offset, iterator=0, key=list(key))


def data(body: bytes) -> list:
    return msgpack.unpackb(body, strict_map_key=False)[DATA]


def error_of(fn, *args) -> tuple[int, str]:
    with pytest.raises(ClientError) as info:
        fn(*args)
    return info.value.code, info.value.message


class World:
    """A started Box with space `t` (id 512, unsigned primary key) and user `u`
    (id 32, no privileges on `t`), its executor, and a session per user."""

    def __init__(self, sched: Scheduler, box: Box):
        self.sched, self.box = sched, box
        self.ddl = Ddl(box.engine, box.schema, lambda: ADMIN.id)
        self.t = self.ddl.space_create("t")
        self.ddl.index_create(self.t.id, "pk")
        self.uid = self.ddl.user_create("u", {"password": "secret"})
        self.ddl.role_create("r")
        self.executor = BoxExecutor(lambda: box)

    def session(self, user: SessionUser) -> Session:
        return Session(self.sched, "test", user)

    @property
    def admin(self) -> Session:
        return self.session(ADMIN)

    @property
    def u(self) -> Session:
        return self.session(SessionUser(self.uid, "u"))


@pytest.fixture
def in_box(tmp_path):
    """in_box(fn): fn(world) in the tx fiber of a started Box, then the Box stops."""
    def run(fn):
        sched = Scheduler()
        result = []

        def main():
            box = Box(sched)
            cfg = defaults()
            cfg.update(work_dir=str(tmp_path), wal_mode="write")
            box.start(cfg)
            try:
                result.append(fn(World(sched, box)))
            finally:
                box.stop()
        try:
            sched.run(main)
        finally:
            sched.shutdown(timeout=2)
            sched.close()
        return result[0]
    return run


# ------------------------------------------------------------------- SELECT

def test_select_needs_read_access_then_index_and_key(in_box):
    def body(w: World):
        ex, t = w.executor, w.t
        w.t.replace([1, "a"])
        w.t.replace([2, "b"])
        assert data(ex.execute(w.admin, select(t.id, [1]))) == [[1, "a"]]
        assert data(ex.execute(w.admin, select(t.id, limit=1, offset=1))) == [[2, "b"]]
        assert data(ex.execute(w.admin, select(t.id, [3]))) == []
        assert error_of(ex.execute, w.u, select(t.id)) == (
            ErrorCode.ER_ACCESS_DENIED, "Read access to space 't' is denied for user 'u'")
        w.ddl.user_grant("u", "read", "space", "t")
        assert data(ex.execute(w.u, select(t.id))) == [[1, "a"], [2, "b"]]
        # a revoke changes the schema: the remembered grant goes with it
        w.ddl.user_revoke("u", "read", "space", "t")
        assert error_of(ex.execute, w.u, select(t.id))[0] == ErrorCode.ER_ACCESS_DENIED
        assert error_of(ex.execute, w.admin, select(9999)) == (
            ErrorCode.ER_NO_SUCH_SPACE, "Space '9999' does not exist")
        assert error_of(ex.execute, w.admin, select(t.id, index_id=3)) == (
            ErrorCode.ER_NO_SUCH_INDEX_ID, "No index #3 is defined in space 't'")
    in_box(body)


def test_views_show_a_user_only_what_it_may_see(in_box):
    def body(w: World):
        ex = w.executor
        vspace = w.box.engine.space("_vspace").id
        seen_by_admin = {row[2] for row in data(ex.execute(w.admin, select(vspace)))}
        seen_by_u = {row[2] for row in data(ex.execute(w.u, select(vspace)))}
        assert "t" in seen_by_admin and "_space" in seen_by_admin
        assert "t" not in seen_by_u and seen_by_u < seen_by_admin
        w.ddl.user_grant("u", "read", "space", "t")
        assert "t" in {row[2] for row in data(ex.execute(w.u, select(vspace)))}
        # offset and limit count the visible rows only
        visible = data(ex.execute(w.u, select(vspace)))
        assert data(ex.execute(w.u, select(vspace, offset=1, limit=2))) == visible[1:3]
        assert data(ex.execute(w.u, select(vspace, limit=0))) == []
    in_box(body)


# ---------------------------------------------------------------------- DML

def test_dml_statements_autocommit_through_the_wal(in_box):
    def body(w: World):
        ex, t, box = w.executor, w.t, w.box
        lsn = box.vclock.get(box.instance_id)
        insert = request(IprotoType.INSERT, space_id=t.id, tuple=[1, "a"])
        assert w.executor.plain_dml(insert)
        assert data(ex.execute(w.admin, insert)) == [[1, "a"]]
        assert data(ex.execute(w.admin, request(IprotoType.REPLACE, space_id=t.id,
                                                tuple=[2, "b"]))) == [[2, "b"]]
        assert data(ex.execute(w.admin, request(
            IprotoType.UPDATE, space_id=t.id, index_id=0, key=[1],
            tuple=[["=", 1, "z"]]))) == [[1, "z"]]
        assert data(ex.execute(w.admin, request(
            IprotoType.UPSERT, space_id=t.id, tuple=[3, "c"], ops=[]))) == []
        assert data(ex.execute(w.admin, request(
            IprotoType.DELETE, space_id=t.id, index_id=0, key=[2]))) == [[2, "b"]]
        assert data(ex.execute(w.admin, request(
            IprotoType.DELETE, space_id=t.id, index_id=0, key=[2]))) == []
        assert t.select() == [(1, "z"), (3, "c")]
        assert box.engine.txns.current is None
        # each statement its own transaction, written to the WAL (the DELETE that
        # found nothing too, as in 2.6.0)
        assert box.vclock.get(box.instance_id) == lsn + 6
        assert error_of(ex.execute, w.admin, insert) == (
            ErrorCode.ER_TUPLE_FOUND,
            "Duplicate key exists in unique index 'pk' in space 't'")
    in_box(body)


def test_dml_refusals_in_box_process1_order(in_box):
    def body(w: World):
        ex, t, box = w.executor, w.t, w.box
        insert = request(IprotoType.INSERT, space_id=t.id, tuple=[1])
        assert error_of(ex.execute, w.u, request(IprotoType.INSERT, space_id=9999,
                                                 tuple=[1]))[0] == ErrorCode.ER_NO_SUCH_SPACE
        assert error_of(ex.execute, w.u, insert) == (
            ErrorCode.ER_ACCESS_DENIED, "Write access to space 't' is denied for user 'u'")
        # read-only comes before access; a temporary space is writable anyway
        box.set_read_only("config", True)
        assert error_of(ex.execute, w.u, insert)[0] == ErrorCode.ER_READONLY
        assert error_of(ex.execute, w.admin, insert)[0] == ErrorCode.ER_READONLY
        box.set_read_only("config", False)
        w.ddl.user_grant("u", "write", "space", "t")
        assert data(ex.execute(w.u, insert)) == [[1]]
        temp = w.ddl.space_create("temp", {"temporary": True})
        w.ddl.index_create(temp.id, "pk")
        box.set_read_only("config", True)
        assert error_of(ex.execute, w.u, request(IprotoType.INSERT, space_id=temp.id,
                                                 tuple=[1]))[0] == ErrorCode.ER_ACCESS_DENIED
        assert data(ex.execute(w.admin, request(IprotoType.INSERT, space_id=temp.id,
                                                tuple=[1]))) == [[1]]
        box.set_read_only("config", False)
        vspace = box.engine.space("_vspace")
        assert error_of(ex.execute, w.admin, request(IprotoType.DELETE, space_id=vspace.id,
                                                     index_id=0, key=[512])) == (
            ErrorCode.ER_VIEW_IS_RO, "View '_vspace' is read-only")
    in_box(body)


def test_plain_dml_only_for_a_user_memtx_space_without_triggers(in_box):
    def body(w: World):
        ex, t = w.executor, w.t
        assert ex.plain_dml(request(IprotoType.REPLACE, space_id=t.id, tuple=[1]))
        assert not ex.plain_dml(request(IprotoType.REPLACE, space_id=9999, tuple=[1]))
        system = w.box.engine.space("_schema").id
        assert not ex.plain_dml(request(IprotoType.REPLACE, space_id=system, tuple=["x"]))
        t.on_replace.add(lambda old, new, name, op: None)
        assert not ex.plain_dml(request(IprotoType.REPLACE, space_id=t.id, tuple=[1]))
    in_box(body)


# ------------------------------------------------------- users, VOTE, others

def test_users_and_sessions(in_box):
    def body(w: World):
        ex = w.executor
        user = ex.find_user("u")
        assert isinstance(user, AuthUser) and (user.id, user.name) == (w.uid, "u")
        assert user.password_hash
        assert ex.find_user("r") is None and ex.find_user("nobody") is None
        ex.check_session(w.u, user)
        w.ddl.user_revoke("u", "session", "universe")
        assert error_of(ex.check_session, w.u, user)[0] == ErrorCode.ER_ACCESS_DENIED
        assert ex.schema_version() == w.box.schema.version
        assert ex.instance_uuid() == w.box.instance_uuid
    in_box(body)


def test_vote_ballot_and_requests_that_need_lua(in_box):
    def body(w: World):
        ex, box = w.executor, w.box
        ballot = ex.execute(w.admin, request(IprotoType.VOTE))[K.BALLOT]
        assert list(ballot) == [BALLOT_IS_RO, BALLOT_IS_LOADING, BALLOT_VCLOCK,
                                BALLOT_GC_VCLOCK]
        assert ballot[BALLOT_IS_RO] is False and ballot[BALLOT_IS_LOADING] is False
        assert ballot[BALLOT_VCLOCK] == box.vclock.to_wire()
        box.set_read_only("config", True)
        ballot = ex.ballot()
        assert ballot[BALLOT_IS_RO] is True and ballot[BALLOT_IS_LOADING] is True
        assert ex.execute(w.admin, request(IprotoType.VOTE_DEPRECATED)) == {
            K.VCLOCK: box.vclock.to_wire()}
        assert error_of(ex.execute, w.admin, request(
            IprotoType.CALL, function_name="f", tuple=[])) == (
            ErrorCode.ER_UNSUPPORTED, "Spindle does not support CALL without Lua")
        assert error_of(ex.execute, w.admin, request(IprotoType.EVAL, expr="return 1",
                                                     tuple=[]))[0] == ErrorCode.ER_UNSUPPORTED
        assert error_of(ex.execute, w.admin, request(
            IprotoType.EXECUTE, sql_text="SELECT 1", sql_bind=[]))[1] == \
            "Spindle does not support SQL"
    in_box(body)


def test_before_the_box_starts_requests_get_er_loading():
    sched = Scheduler()
    try:
        executor = BoxExecutor(lambda: None)
        session = Session(sched, "test", ADMIN)
        assert error_of(executor.execute, session, select(512))[0] == ErrorCode.ER_LOADING
        assert error_of(executor.find_user, "admin")[0] == ErrorCode.ER_LOADING
        assert executor.schema_version() == 0 and executor.instance_uuid() is None
        assert not executor.plain_dml(request(IprotoType.INSERT, space_id=512, tuple=[1]))
        assert executor.ballot() == {BALLOT_IS_RO: False, BALLOT_IS_LOADING: True,
                                     BALLOT_VCLOCK: {}, BALLOT_GC_VCLOCK: {}}
    finally:
        sched.close()


def test_replication_requests_go_to_the_handler_given():
    assert not hasattr(BoxExecutor(lambda: None), "replication")
    seen = []
    executor = BoxExecutor(lambda: None, replication=lambda *args: seen.append(args))
    join = request(IprotoType.JOIN, instance_uuid="7c8b3c4e-0000-4000-8000-000000000001")
    executor.replication("session", join, "stream")
    assert seen == [(executor, "session", join, "stream")]


def test_session_admin_only_follows_auth_and_su_frames():
    """Session.admin_only (the flag box.space's natives read before their access
    check) is true exactly while every fiber of the session runs as admin."""
    session = Session(None, user=ADMIN)
    assert session.admin_only
    other = SessionUser(5, "u")
    with session.su(other):
        assert not session.admin_only
        with session.su(ADMIN):
            assert not session.admin_only        # the outer frame is still u's
        assert not session.admin_only
    assert session.admin_only
    session.set_user(other)                      # AUTH as another user
    assert not session.admin_only
    with session.su(ADMIN):
        assert not session.admin_only            # the session's own user is u
    session.set_user(ADMIN)
    assert session.admin_only
    assert not Session(None).admin_only          # guest
