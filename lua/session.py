"""box.session for Lua: the session of the running fiber.

A fiber serving an IPROTO request is bound to its connection's Session (the
server does it: core/net/session.py `current_session`). Any other fiber (the
startup script, the console, fiber.create bodies) gets a `background` session of
its own on first use, as 2.6.0's session_create_on_demand does, acting as admin.

Everything here only reads or changes Python state, so the natives are plain
bridges; box.session.su(user, fn, ...) runs fn through the caller's own coroutine
(pcall in Lua), so it may block.
"""
from __future__ import annotations

from typing import Any, Callable

from spindle.core import log
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.msgpack import MsgpackRaw, packb
from spindle.core.net.session import ADMIN, SessionUser, Session, current_session

from .errors import LuaError
from .runtime import Multi


def _plain_error(message: str) -> Exception:
    """An error Lua sees as a plain string, as 2.6.0 raises it with luaL_error."""
    exc = ClientError(ErrorCode.ER_PROC_LUA, message)
    exc.lua_plain = True
    return exc

_SESSION_LUA = b"""
local native, session, trigger_reset, wait, console_push = ...
local rawget, rawset, pcall, error, select, unpack = rawget, rawset, pcall, error, select, unpack
session = session or {}
local storages = {}

local function define(name, fn)
    if rawget(session, name) == nil then
        rawset(session, name, fn)
    end
end

local function pack(...)
    return {n = select('#', ...), ...}
end

define('id', function() return native.id() end)
define('exists', function(id) return native.exists(id) end)
define('peer', function(id) return native.peer(id) end)
define('sync', function() return native.sync() end)
define('user', function() return native.user() end)
define('type', function() return native.type() end)
define('uid', function() return native.uid() end)
define('euid', function() return native.euid() end)
define('push', function(...)
    if select('#', ...) ~= 1 then
        error('Usage: box.session.push(data)', 0)
    end
    local value = ...
    local kind = native.type()
    if kind == 'console' or kind == 'repl' then
        -- the console formats the Lua value and writes it: the write may block
        return wait(console_push, {value})
    end
    return native.push(value)
end)
define('su', function(user, fn, ...)
    if not native.configured() then     -- no users yet: 2.6.0 checks this first
        error('Please call box.cfg{} first', 0)
    end
    if fn == nil then
        native.su_set(user)
        return
    end
    native.su_push(user)
    local result = pack(pcall(fn, ...))
    native.su_pop()
    if not result[1] then
        error(result[2], 0)
    end
    return unpack(result, 2, result.n)
end)

define('effective_user', function() return native.effective_user() end)
define('fd', function(id) return native.fd(id) end)

-- box.session.on_connect / on_disconnect / on_auth: trigger lists (newest first)
-- with the trigger API of every box trigger; native.triggers_changed tells
-- Python which lists are empty (a connection then costs no Lua call).
local triggers = {connect = {}, disconnect = {}, auth = {}}
for kind, list in pairs(triggers) do
    define('on_' .. kind, function(...)
        return trigger_reset(list, function(l) native.triggers_changed(kind, #l) end, ...)
    end)
end

local function run_triggers(kind, ...)
    local list = triggers[kind]
    local copy = {}
    for i = 1, #list do
        copy[i] = list[i]
    end
    for _, fn in ipairs(copy) do
        fn(...)
    end
end

-- box.session.storage: a table per session, dropped when the session ends
local mt = getmetatable(session)
if mt == nil then
    mt = {}
    setmetatable(session, mt)
end
if mt.__index == nil then
    mt.__index = function(_, key)
        if key == 'storage' then
            local id = native.id()
            local storage = storages[id]
            if storage == nil then
                storage = {}
                storages[id] = storage
            end
            return storage
        end
    end
end

return session, function(id) storages[id] = nil end, run_triggers
"""


class SessionModule:
    """The natives behind box.session; `box_provider()` gives the Box (or None)."""

    def __init__(self, runtime, box_provider: Callable[[], Any]):
        self.runtime = runtime
        self.sched = runtime.sched
        self._box_provider = box_provider
        self.live: dict[int, Session] = {}      # connected sessions by id
        self._drop_storage = None
        self._run_triggers = None
        self._trigger_counts = {"connect": 0, "disconnect": 0, "auth": 0}
        self.natives = {
            "id": lambda: self.current().id,
            "exists": lambda sid=None: self._find(sid) is not None,
            "peer": self._peer,
            "sync": lambda: self.current().sync,
            "user": lambda: self._user_name(self.current().user),
            "type": lambda: self.current().type,
            "uid": lambda: self.current().uid,
            "euid": lambda: self.current().euid,
            "push": self._push,
            "su_set": lambda user: self.current().set_user(self._lookup(user)),
            "su_push": lambda user: self.current().push_user(self._lookup(user)),
            "su_pop": lambda: self.current().pop_user(),
            "effective_user": lambda: self._user_name(self.current().effective_user),
            "fd": self._fd,
            "configured": self._configured,
            "triggers_changed": self._triggers_changed,
        }

    # ------------------------------------------------------------- Lua side

    def install(self, box_table, trigger_reset) -> None:
        """Define box.session (or fill in what an existing box.session lacks);
        `trigger_reset` is the trigger API every box trigger list shares."""
        runtime = self.runtime
        rawget = runtime.lua.eval("rawget")
        existing = rawget(box_table, b"session")
        natives = runtime.table({k: runtime.bridge(v) for k, v in self.natives.items()})
        chunk = runtime.load(_SESSION_LUA, "=box.session")
        session, self._drop_storage, self._run_triggers = chunk(
            natives, existing, trigger_reset, runtime.wait, self._console_push)
        runtime.lua.eval("rawset")(box_table, b"session", session)

    def _triggers_changed(self, kind: str, count: int) -> None:
        self._trigger_counts[kind] = int(count)

    def _run(self, kind: str, session: Session, *args: Any) -> None:
        """Run the `kind` triggers in the calling fiber, as `session`'s (they may
        yield; an error propagates: it refuses the connection or the AUTH)."""
        if self._trigger_counts[kind] and self._run_triggers is not None:
            fiber = self.sched.current
            if fiber is not None:
                session.bind(fiber)
            try:
                self.runtime.call(self._run_triggers, kind, *args)
            except LuaError as exc:
                if exc.code == ErrorCode.ER_UNKNOWN and type(exc) is LuaError:
                    exc.code = ErrorCode.ER_PROC_LUA      # error('text'), as 2.6.0 sends it
                raise

    def _configured(self) -> bool:
        box = self._box_provider()
        return box is not None and box.configured

    def _fd(self, sid: Any = None) -> int:
        session = self._find(sid)
        if session is None:
            raise _plain_error("session.fd(): session does not exist")
        return session.fd

    # ------------------------------------------------------------ sessions

    def current(self) -> Session:
        fiber = self.sched.current
        session = current_session(fiber)
        if session is None:
            session = Session(self.sched, "", ADMIN)
            session.type = "background"
            if fiber is not None:
                session.bind(fiber)
        return session

    def connected(self, session: Session) -> None:
        """A client connected: box.session.on_connect triggers run before the
        greeting, as the new session (guest); an error refuses the connection."""
        self.live[session.id] = session
        self._run("connect", session)

    def on_auth(self, session: Session, user_name: str, ok: bool) -> None:
        """After an AUTH's check, still as the user before it: on_auth(user, ok);
        an error fails the AUTH with it."""
        self._run("auth", session, user_name, ok)

    def disconnected(self, session: Session) -> None:
        """In a fiber of its own once the connection is gone (a refused one too):
        on_disconnect triggers (their errors are logged), then the storage goes."""
        self.live.pop(session.id, None)
        try:
            self._run("disconnect", session)
        finally:
            if self._drop_storage is not None:
                self.runtime.invoke(self._drop_storage, session.id)

    def _find(self, sid: Any) -> Session | None:
        current = self.current()
        if sid is None or sid == current.id:
            return current
        return self.live.get(sid)

    def _peer(self, sid: Any = None) -> str | None:
        session = self._find(sid)
        if session is None:
            raise _plain_error("session.peer(): session does not exist")
        if session.type == "repl":      # its fd is standard input or output
            log.say(log.SYSERROR, "getpeername: Socket operation on non-socket")
            raise _plain_error("session.peer(): getpeername() failed")
        return session.peer or None

    def _unsupported_push(self, session: Session) -> Multi:
        # 2.6.0 returns nil, error here instead of raising
        err = ClientError(ErrorCode.ER_UNSUPPORTED, f"Session '{session.type}'", "push()")
        return Multi((None, self.runtime.error_to_lua(err)))

    def _push(self, value: Any) -> Any:
        from .iproto import _to_wire
        session = self.current()
        if session.type != "binary":
            return self._unsupported_push(session)
        session.push(MsgpackRaw(packb(_to_wire(value))))
        return True

    def _console_push(self, packed) -> Any:
        """A console session's push (a wait-request: it may block its fiber): its
        console (lua/modules/console.py) writes the value to the client in the
        session's output format, before the statement's reply."""
        session = self.current()
        pusher = getattr(session, "console_push", None)
        if pusher is None:
            return self._unsupported_push(session)
        return pusher(packed)

    # --------------------------------------------------------------- users

    def _user_name(self, user: SessionUser) -> str:
        box = self._box_provider()
        if box is not None:
            found = box.schema.users.get(user.id)
            if found is not None:
                return found.name
        return user.name

    def _lookup(self, user: Any) -> SessionUser:
        box = self._box_provider()
        if box is None:
            raise ClientError(ErrorCode.ER_LOADING)
        schema = box.schema
        found = schema.users.get(user) if isinstance(user, int) else schema.user_by_name(user)
        if found is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_USER, str(user))
        return SessionUser(found.id, found.name)
