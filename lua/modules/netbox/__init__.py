"""Tarantool 2.6.0's `net.box` for Lua: the API in net_box.lua, the requests in
flight in net_box_wire.lua, the connection in transport.py. This file hands the Lua
side its natives (never blocking) and the blocking calls it runs through wait()."""
from __future__ import annotations

from typing import Any

from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.replication.uri import parse_uri

from ...runtime import read_source
from .transport import TIMEOUT_INFINITY, Transport, reply_error, state_error


class NetBoxModule:
    def __init__(self, instance):
        self.runtime = runtime = instance.runtime
        self.sched = runtime.sched
        error_object = runtime.error_object
        natives = {
            "send_now": lambda tr, frame: tr.send_now(frame),
            "want_flush": lambda tr: tr.want_flush(),
            "flush": lambda tr: tr.flush(),
            "reply_error": lambda status, body: error_object(reply_error(int(status), body)),
            "state_error": lambda tr: error_object(state_error(tr.last_code, tr.last_error)),
            "no_connection": lambda: error_object(ClientError(ErrorCode.ER_NO_CONNECTION)),
            "discarded": lambda: error_object(
                BoxError("Response is discarded", ErrorCode.ER_PROC_LUA)),
            "parse_uri": self._parse_uri,
            "collected": lambda tr: tr.collected(),
            "abort": lambda tr, message: tr.abort(
                message.decode("utf-8", "surrogateescape")),
        }
        blocking = {
            "start": self._start,
            "wait_reply": Transport.wait_reply,
            "wait_state": self._wait_state,
            "close": lambda tr: tr.stop(),
        }
        from ...iproto import _CALL_LUA
        call_global, _ = runtime.load(_CALL_LUA, "=call")()
        native = runtime.table({k: runtime.bridge(v, convert_args=False)
                                for k, v in natives.items()})
        blocking_table = runtime.table(blocking)
        self.wire_fns = runtime.load(read_source("modules/netbox/net_box_wire.lua"),
                                     "@net_box_wire.lua")(native, blocking_table, runtime.wait)
        chunks = [runtime.load(read_source(f"modules/netbox/{name}.lua"), f"@{name}.lua")
                  for name in ("net_box", "net_box_schema", "net_box_self")]
        self.lua_module = chunks[0](
            native, blocking_table, runtime.wait, self.wire_fns,
            instance.storage.tuple_lua, call_global, chunks[1], chunks[2],
            instance.storage.spaces.lua[b"checks"])

    def _parse_uri(self, text: bytes) -> Any:
        """uri.parse() as net.box reads it: host, service (a string), login,
        password; None where there is no service."""
        try:
            uri = parse_uri(text.decode("utf-8", "surrogateescape"))
        except ValueError:
            return None
        if not text.strip():
            return None
        parts = {"host": uri.host, "service": str(uri.port), "login": uri.user,
                 "password": uri.password}
        return {k: v for k, v in parts.items() if v is not None}

    # -------------------------------------------------------------- blocking

    def _start(self, host, port, user, password, callback, wire) -> Transport:
        text = self.runtime.convert.text
        tr = Transport(self.runtime, text(host) if host is not None else "localhost",
                       _port(text(port)), None if user is None else text(user),
                       None if password is None else text(password), callback, wire,
                       self.wire_fns)
        tr.start()
        return tr

    def _wait_state(self, tr: Transport, target, timeout) -> bool:
        if isinstance(target, bytes):
            states: Any = target.decode()
        else:
            wanted = self.runtime.to_py(target)
            states = {str(k) for k, v in wanted.items() if v} if isinstance(wanted, dict) \
                else set()
        timeout = TIMEOUT_INFINITY if timeout is None else max(0.0, float(timeout))
        return tr.wait_state(states, timeout)


def _port(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def build(instance):
    return NetBoxModule(instance).lua_module
