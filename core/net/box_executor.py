"""The box executor: what IPROTO requests do to a configured box (2.6.0's box.cc),
behind core/net's protocol layer. Everything here runs without Lua; CALL, CALL_16
and EVAL run stored code, so the instance's executor is lua/iproto.py's subclass,
which adds them (a box without a Lua runtime refuses them, ER_UNSUPPORTED).

* SELECT: space, then read access, then index, iterator and key checks (box_select);
  `_v*` views read their source space and show a user only the rows it may see.
* INSERT/REPLACE/UPDATE/UPSERT/DELETE (box_process1): space, then the read-only
  refusal (temporary spaces excepted), then write access; each statement is its own
  autocommit transaction through the Box's engine, whose journal is the WAL.
* VOTE: the ballot {is_ro, is_loading, vclock, gc_vclock} in 2.6.0's key order
  (is_loading is also true when box.cfg.read_only is, as 2.6.0 sends it).
* JOIN / SUBSCRIBE / FETCH_SNAPSHOT / REGISTER go to the `replication` handler the
  executor is built with (core/replication/master.py's box_process_replication):
  the master side of replication sits above this layer, so it is handed in.

Every request runs in its own fiber (the server's), bound to its session, except
the two the server serves in the connection's reader fiber: SELECT (it never
yields: `nonblocking_select`) and a DML request `plain_dml` admits.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Callable

from spindle.core.box.access import VIEW_SOURCE, Access, Priv
from spindle.core.box.stat import REQUESTS
from spindle.core.iproto.constants import IprotoKey, IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.msgpack import packb
from spindle.core.iproto.request import DmlRequest

from . import requests as rq
from .executor import IprotoExecutor
from .session import AuthUser, Session

if TYPE_CHECKING:
    from spindle.core.instance_api import InstanceApi

BALLOT_IS_RO, BALLOT_VCLOCK, BALLOT_GC_VCLOCK, BALLOT_IS_LOADING = 0x01, 0x02, 0x03, 0x04
# box.stat()'s slots, as plain ints
_SELECT, _AUTH, _CALL, _EVAL = map(int, (IprotoType.SELECT, IprotoType.AUTH,
                                         IprotoType.CALL, IprotoType.EVAL))
# (an enum member read from its class costs ~0.1 µs on Python 3.11: read once)
_R, _W = Priv.R, Priv.W
_USER_SPACE_ID_MIN = 512          # BOX_SYSTEM_ID_MAX + 1: below are system spaces
_pack_u32 = struct.Struct(">I").pack
_DATA_HEAD = b"\x81\x30\xdd"        # {DATA: [...]} with a 32-bit array header, as 2.6.0

# handler(executor, session, request, stream): see `replication` in executor.py
ReplicationHandler = Callable[["BoxExecutor", Session, rq.ReplicationRequest, Any], None]
# what box_process1 executes (Replace is an Insert)
DmlKind = rq.Insert | rq.Update | rq.Upsert | rq.Delete


class LoadingError(ClientError):
    def __init__(self):
        super().__init__(ErrorCode.ER_LOADING)


class BoxExecutor(IprotoExecutor):
    """The executor of core/net/executor.py for a Box (core/instance/box.py, seen
    through core/instance_api.py's InstanceApi). `box_provider()` gives the Box once box.cfg has started it (None before:
    requests then get ER_LOADING, as during 2.6.0's recovery). `access_provider()`,
    if given, is the Access whose checks every request obeys (the instance's, shared
    with Lua); without it the executor keeps one per schema."""

    # SELECT runs no Lua and never waits: the server may serve it in place.
    nonblocking_select = True

    def __init__(self, box_provider: Callable[[], InstanceApi | None],
                 access_provider: Callable[[], Access] | None = None,
                 replication: ReplicationHandler | None = None):
        self._box_provider = box_provider
        self._access_provider = access_provider
        self._access: Access | None = None
        self._access_schema: Any = None
        # (user, space, privilege) checks that passed, valid while the schema (and
        # so every grant, user and owner) stays as it was, checked by one Access
        self._granted: set = set()
        self._granted_at: Any = None              # the schema they were checked in
        self._granted_version = -1
        self._granted_access: Access | None = None
        self.on_disconnect_hooks: list[Callable[[Session], None]] = []
        if replication is not None:
            # an attribute only when there is a handler: the server looks it up and
            # answers ER_UNKNOWN_REQUEST_TYPE without one
            def replicate(session: Session, request: rq.ReplicationRequest, stream) -> None:
                replication(self, session, request, stream)
            self.replication = replicate

    # ------------------------------------------------------------- the box

    @property
    def box(self) -> InstanceApi:
        """The box of requests that 2.6.0 serves while it recovers (SELECT, CALL,
        EVAL, DML, which the box then refuses as read-only): box.cfg has begun."""
        box = self._box_provider()
        if box is None or box.status == "unconfigured":
            raise LoadingError()
        return box

    @property
    def loaded_box(self) -> InstanceApi:
        """The box of requests that 2.6.0 refuses with ER_LOADING until box.cfg is
        done (AUTH, JOIN, SUBSCRIBE, REGISTER, FETCH_SNAPSHOT: `is_box_configured`)."""
        box = self._box_provider()
        if box is None or box.status in ("unconfigured", "loading"):
            raise LoadingError()
        return box

    @property
    def access(self) -> Access:
        box = self.box
        if self._access_provider is not None:
            return self._access_provider()
        if self._access is None or self._access_schema is not box.schema:
            self._access, self._access_schema = Access(box.schema), box.schema
        return self._access

    def instance_uuid(self) -> str | None:
        """The greeting's UUID: the box's, or the one it will have (a socket binds
        during the first box.cfg, before recovery or bootstrap set it)."""
        box = self._box_provider()
        return box.greeting_uuid if box is not None else None

    def schema_version(self) -> int:
        box = self._box_provider()
        return box.schema.version if box is not None else 0

    # ------------------------------------------------------------ sessions

    def find_user(self, name: str) -> AuthUser | None:
        REQUESTS[_AUTH] += 1                          # box_process_auth counts them all
        user = self.loaded_box.schema.user_by_name(name)
        if user is None or user.type != "user":
            return None
        return AuthUser(user.id, user.name, user.password_hash)

    def check_session(self, session: Session, user: AuthUser) -> None:
        self.access.check_session(user.id)

    def on_disconnect(self, session: Session) -> None:
        for hook in self.on_disconnect_hooks:
            hook(session)

    # ------------------------------------------------------------ dispatch

    def execute(self, session: Session, request: rq.Request) -> Any:
        # SELECT and DML first: they are the requests served in the reader fiber
        if isinstance(request, rq.Select):
            return self.select(session, request)
        if isinstance(request, (rq.Insert, rq.Update, rq.Upsert, rq.Delete)):
            return self.dml(session, request)
        if isinstance(request, rq.Call):              # (CALL_16 too, as 2.6.0)
            REQUESTS[_CALL] += 1
            return self.call(session, request)
        if isinstance(request, rq.Eval):
            REQUESTS[_EVAL] += 1
            return self.eval(session, request)
        if isinstance(request, rq.Vote):
            return {IprotoKey.BALLOT: self.ballot()}
        if isinstance(request, rq.VoteDeprecated):
            return {IprotoKey.VCLOCK: self._wire_vclock(self.box.vclock)}
        if isinstance(request, rq.Execute):
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "Spindle", "SQL")
        raise ClientError(ErrorCode.ER_UNKNOWN_REQUEST_TYPE, request.type)

    def call(self, session: Session, request: rq.Call) -> Any:
        """CALL and CALL_16 run a Lua function: lua/iproto.py's executor does."""
        raise ClientError(ErrorCode.ER_UNSUPPORTED, "Spindle", "CALL without Lua")

    def eval(self, session: Session, request: rq.Eval) -> Any:
        """EVAL runs a Lua chunk: lua/iproto.py's executor does."""
        raise ClientError(ErrorCode.ER_UNSUPPORTED, "Spindle", "EVAL without Lua")

    # ---------------------------------------------------------------- data

    def _check_space(self, box, user_id: int, space, priv: Priv) -> None:
        """Access.check_space, remembered while the schema does not change (every
        grant, user, role and owner lives in a system space: a change moves the
        schema version) and the Access object stays the same."""
        schema = box.schema
        access = (self._access_provider() if self._access_provider is not None
                  else self.access)
        if (self._granted_at is not schema or self._granted_version != schema.version
                or self._granted_access is not access):
            self._granted.clear()
            self._granted_at, self._granted_version = schema, schema.version
            self._granted_access = access
        key = (user_id, space.id, priv)
        if key in self._granted:
            return
        access.check_space(user_id, space, priv)
        self._granted.add(key)

    def select(self, session: Session, request: rq.Select) -> bytes:
        REQUESTS[_SELECT] += 1
        box = self.box
        space = box.engine.find_space(request.space_id)
        if space is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_SPACE, str(request.space_id))
        user_id = session.euid
        self._check_space(box, user_id, space, _R)
        key = request.key
        if space.engine == "sysview":
            rows = self._view_select(space, request, key, user_id)
        else:
            rows = space.index(request.index_id).select(
                key, request.iterator, offset=request.offset, limit=request.limit)
        return _data_body(rows)

    def _view_select(self, view, request: rq.Select, key: list, user_id: int) -> list:
        view.index(request.index_id)            # the view's own index must exist
        source = self.box.engine.space(VIEW_SOURCE[view.id])
        access = self.access
        offset, limit = request.offset, request.limit
        out: list = []
        if limit <= 0:
            return out
        for row in source.index(request.index_id).pairs(key, request.iterator):
            if not access.visible(user_id, view.id, row):
                continue
            if offset:
                offset -= 1
                continue
            out.append(row)
            if len(out) >= limit:
                break
        return out

    def plain_dml(self, request: DmlKind) -> bool:
        """True if `request` runs no Lua, changes no schema and waits for nothing but
        its own WAL write: a user space of a ready box, without triggers, not
        synchronous, with no synchronous transaction pending. The server may then run
        it in the connection's reader fiber (no fiber of its own). Not with
        wal_mode = 'fsync': packets arriving on the connection while the reader waits
        are read only after the commit, and an fsync wait is long enough for a
        pipelining client to lose its group commit."""
        box = self._box_provider()
        if (box is None or box.status in ("unconfigured", "loading")
                or box.cfg.get("wal_mode") == "fsync"):
            return False
        space = box.engine.find_space(request.space_id)
        return (space is not None and space.id >= _USER_SPACE_ID_MIN
                and space.engine == "memtx" and not space.is_sync
                and not len(space.before_replace) and not len(space.on_replace)
                and (box.limbo is None or not box.limbo.queue))

    def dml(self, session: Session, request: DmlKind) -> bytes:
        box = self.box
        space = box.engine.find_space(request.space_id)
        if space is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_SPACE, str(request.space_id))
        if box.read_only_reasons:
            box.check_writable(space)
        self._check_space(box, session.euid, space, _W)
        if space.engine == "sysview":
            raise ClientError(ErrorCode.ER_VIEW_IS_RO, space.name)
        result = space.execute_request(_dml_request(request))
        if result is None or isinstance(request, rq.Upsert):
            return _EMPTY_DATA
        return _DATA_ONE + packb(result)

    # ---------------------------------------------------------------- vote

    def ballot(self) -> dict:
        box = self._box_provider()
        loading = box is None or box.status in ("unconfigured", "loading")
        cfg_ro = box is not None and "config" in box.read_only_reasons
        vclock = box.vclock if box is not None else None
        gc = box.gc if box is not None else None
        return {
            BALLOT_IS_RO: cfg_ro,
            # 2.6.0 sends its `is_ro` flag here: true while loading, then
            # box.cfg.read_only (a read-only peer ranks like a loading one)
            BALLOT_IS_LOADING: loading or cfg_ro,
            BALLOT_VCLOCK: self._wire_vclock(vclock),
            BALLOT_GC_VCLOCK: self._wire_vclock(gc.vclock if gc is not None else vclock),
        }

    @staticmethod
    def _wire_vclock(vclock) -> dict:
        return vclock.to_wire() if vclock is not None else {}


# ------------------------------------------------------------------ values

_EMPTY_DATA = _DATA_HEAD + _pack_u32(0)
_DATA_ONE = _DATA_HEAD + _pack_u32(1)


def _data_body(rows) -> bytes:
    """The reply body {DATA: rows}, every row encoded as box stores it."""
    if not rows:
        return _EMPTY_DATA
    if len(rows) == 1:
        return _DATA_ONE + packb(rows[0])
    return _DATA_HEAD + _pack_u32(len(rows)) + b"".join([packb(row) for row in rows])


def _dml_request(request: DmlKind) -> DmlRequest:
    """The request's values as they are: the decoder made extensions what box keeps."""
    # DmlRequest(type, space_id, index_id, index_base, key, tuple, ops)
    if isinstance(request, rq.Insert):           # and Replace
        return DmlRequest(request.type, request.space_id, 0, 0, None, request.tuple)
    if isinstance(request, rq.Update):
        return DmlRequest(request.type, request.space_id, request.index_id,
                          request.index_base, request.key, None, request.ops)
    if isinstance(request, rq.Upsert):
        return DmlRequest(request.type, request.space_id, 0, request.index_base, None,
                          request.tuple, request.ops)
    return DmlRequest(request.type, request.space_id, request.index_id, 0, request.key)
