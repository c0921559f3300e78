"""Tarantool 2.6.0's `net.box` for Lua: the API in net_box.lua, the connection in
transport.py. This file hands the Lua side its natives (never blocking) and the
blocking calls it runs through wait()."""
from __future__ import annotations

from typing import Any

from spindle.core.fiber import Cond
from spindle.core.replication.uri import parse_uri

from ...runtime import Multi, read_source
from .transport import TIMEOUT_INFINITY, Request, Transport, endless


class NetBoxModule:
    def __init__(self, instance):
        self.runtime = runtime = instance.runtime
        self.sched = runtime.sched
        natives = {
            "perform_async": self._perform_async,
            "is_ready": lambda tr, req: req.done or not tr.alive(),
            "outcome": self._outcome,
            "discard": lambda tr, req: tr.discard(req),
            "push": self._push,
            "push_count": lambda req: len(req.pushes or ()),
            "parse_uri": self._parse_uri,
            "collected": lambda tr: tr.collected(),
            "abort": lambda tr, message: tr.abort(
                message.decode("utf-8", "surrogateescape")),
        }
        blocking = {
            "start": self._start,
            "request": self._request,
            "wait_result": lambda tr, req, timeout: tr.wait_result(req, timeout),
            "wait_push": self._wait_push,
            "wait_state": self._wait_state,
            "close": lambda tr: tr.stop(),
        }
        from ...iproto import _CALL_LUA
        call_global, _ = runtime.load(_CALL_LUA, "=call")()
        chunks = [runtime.load(read_source(f"modules/netbox/{name}.lua"), f"@{name}.lua")
                  for name in ("net_box", "net_box_schema", "net_box_self")]
        self.lua_module = chunks[0](
            runtime.table({k: runtime.bridge(v, convert_args=False) for k, v in natives.items()}),
            runtime.table(blocking), runtime.wait, instance.storage.tuple_lua, call_global,
            chunks[1], chunks[2], instance.storage.spaces.lua[b"checks"])

    # ---------------------------------------------------------------- natives

    @staticmethod
    def _perform_async(tr: Transport, request_type, body: bytes) -> Request:
        return tr.perform_async(int(request_type), body)

    def _outcome(self, tr: Transport, req: Request) -> Multi:
        """(body) of an answered request, (nil, error) of a failed one, (nil, nil)
        while it is on its way."""
        if req.done and req.error is None:
            return Multi((req.body,))
        if not req.done and tr.alive():
            return Multi((None, None))
        try:
            tr.result(req)
        except Exception as exc:   # noqa: BLE001 - handed to Lua as a value
            return Multi((None, self.runtime.error_object(exc)))
        return Multi((None, None))

    @staticmethod
    def _push(tr: Transport, req: Request, i) -> bytes | None:
        pushes = req.pushes
        i = int(i)
        return pushes[i - 1] if pushes is not None and 0 < i <= len(pushes) else None

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

    def _start(self, host, port, user, password, callback) -> Transport:
        text = self.runtime.convert.text
        tr = Transport(self.runtime, text(host) if host is not None else "localhost",
                       _port(text(port)), None if user is None else text(user),
                       None if password is None else text(password), callback)
        tr.start()
        return tr

    @staticmethod
    def _request(tr: Transport, request_type, body: bytes, timeout) -> bytes:
        return tr.request(int(request_type), body, None if timeout is None else float(timeout))

    @staticmethod
    def _wait_push(tr: Transport, req: Request, i, timeout) -> None:
        """Park until the request has a push number `i`, is answered, or `timeout`."""
        if req.done or len(req.pushes or ()) >= int(i) or not tr.alive():
            return
        if req.cond is None:
            req.cond = Cond(tr.sched)
        timeout = float(timeout)
        req.cond.wait(None if endless(timeout) else timeout)

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
