"""What the iproto server asks of the box: the executor interface.

The server decodes and validates requests, answers PING, performs AUTH and writes
every reply; everything else goes to an executor. Subclass `IprotoExecutor` or
provide the same names (the server looks optional hooks up with getattr, so a
duck-typed object works too). The executor for a Box is box_executor.py's, with
CALL/CALL_16/EVAL added by lua/iproto.py. All methods run in a fiber of the tx thread and may
block (yield); `execute` runs in a fiber of its own per request.

Required:
    execute(session, request) -> result
        `request` is one of spindle.core.net.requests: Select, Insert, Replace,
        Update, Upsert, Delete, Call, Call16, Eval, Execute, Prepare, Vote,
        VoteDeprecated. The result becomes the reply body:
          list/tuple -> {DATA: [...]} (items may be MsgpackRaw: sent verbatim)
          dict       -> that body map, in insertion order (VOTE: {BALLOT: {...}})
          bytes      -> a ready-made MsgPack body map
          None       -> empty body
        Raise a BoxError to answer with an error; its `type`, `code`, `message`,
        and, when present, `file`, `line`, `errno`, `fields` and `prev` (the
        error chained behind it) fill the ERROR stack exactly as 2.6.0 does.
    find_user(name) -> AuthUser | None
        AUTH lookup: (id, name, stored chap-sha1 hash or None). None (also for a
        role) makes AUTH fail with ER_NO_SUCH_USER.

Optional:
    nonblocking_select          True if execute() of a Select never yields: the
                                server then runs it in the connection's reader fiber
                                instead of a fiber of its own
    plain_dml(request) -> bool  True if this INSERT/REPLACE/UPDATE/UPSERT/DELETE runs
                                no Lua and waits only for its WAL write: when the
                                client sent nothing after it and nothing is in flight,
                                the reader serves it itself (no fiber of its own)
    instance_uuid               str or callable: the UUID the greeting shows
    schema_version()            current schema version (reply headers, checks)
    check_session(session, user)   raise (AccessDeniedError) if `user` may not
                                   open sessions; called before the password check
    on_auth(session, user_name, ok)    box.session.on_auth triggers; may raise
    on_connect(session)         raise to refuse: the client gets the error instead
                                of a greeting and the connection is closed
    on_disconnect(session)      runs in its own fiber after the connection is gone
    replication(session, request, stream)
        JOIN / SUBSCRIBE / FETCH_SNAPSHOT / REGISTER (`request` is a
        ReplicationRequest). The handler owns the connection through `stream`
        (iproto_server.ReplicationStream) until it returns; a BoxError it raises
        is sent as an error reply (not socket errors or timeouts). After JOIN,
        FETCH_SNAPSHOT and REGISTER the connection reads requests again; after
        SUBSCRIBE it is closed. Without this hook those requests get
        ER_UNKNOWN_REQUEST_TYPE.
"""
from __future__ import annotations

from typing import Any

from spindle.core.iproto.errors import ClientError, ErrorCode

from .session import AuthUser, Session


class IprotoExecutor:
    instance_uuid: Any = None

    def schema_version(self) -> int:
        return 0

    def execute(self, session: Session, request) -> Any:
        raise ClientError(ErrorCode.ER_UNSUPPORTED, "executor", type(request).__name__)

    def find_user(self, name: str) -> AuthUser | None:
        return None

    def check_session(self, session: Session, user: AuthUser) -> None:
        pass

    def on_auth(self, session: Session, user_name: str, ok: bool) -> None:
        pass

    def on_connect(self, session: Session) -> None:
        pass

    def on_disconnect(self, session: Session) -> None:
        pass
