"""box.cfg.listen: the IPROTO server of an instance, started and moved with the option.

`install(instance)` hangs the service on the instance (`instance.iproto`):

* the `listen` applier records the URI; once the box has started (first box.cfg)
  the server is bound, and every later change stops the old server and starts the
  new one; '' (or box.NULL) stops listening. A failed bind is box.cfg's error
  ("binary: failed to bind, called on fd -1", SocketError, as 2.6.0 says) and the
  option keeps its old value (cfg.py restores it).
* the first-configure hook installs box.session and binds the listen URI.
* URIs as 2.6.0 takes them: `3301` (every address), `host:port`, `[ipv6]:port`,
  `user:password@host:port`, `scheme://host:port`, `unix/:/path` or a `/path`.
* instance shutdown: the scheduler cancels the acceptor and connection fibers,
  which close the listening socket and the connections (iproto_server.py);
  `stop()` does the same gracefully from a fiber.
"""
from __future__ import annotations

import re
import socket
from typing import Any, Callable

from spindle.core import log
from spindle.core.fiber.coio import SocketError
from spindle.core.net.iproto_server import UNIX_HOST, IprotoServer

from .iproto import LuaBoxExecutor
from .session import SessionModule

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+\-.]*://")
_USERINFO = re.compile(r"^[^@/\[\]]*@")


def parse_listen(uri: str) -> tuple[str, Any]:
    """(host, port) for IprotoServer from a listen URI cfg.py already accepted;
    (UNIX_HOST, path) for a unix socket."""
    text = _SCHEME.sub("", str(uri).strip(), count=1)
    text = _USERINFO.sub("", text, count=1)
    if text.isdigit():
        return "0.0.0.0", _port(text)
    if text.startswith("unix/:"):
        return UNIX_HOST, text[len("unix/:"):].split("?", 1)[0]
    if text.startswith("/") or text.startswith("./"):
        return UNIX_HOST, text
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, _port(rest.lstrip(":").split("/", 1)[0])
    host, _, service = text.partition(":")
    return host, _port(service.split("/", 1)[0].split("?", 1)[0])


def _port(service: str) -> int:
    if service.isdigit():
        return int(service) & 0xFFFF         # as getaddrinfo: 99999 is 34463
    try:
        return socket.getservbyname(service, "tcp")
    except OSError:
        raise SocketError(f"binary: cannot resolve service '{service}'") from None


class IprotoService:
    def __init__(self, instance, box_provider: Callable[[], Any],
                 access_provider: Callable[[], Any] | None = None):
        self.instance = instance
        self.sched = instance.sched
        self.box_provider = box_provider
        self.sessions = SessionModule(instance.runtime, box_provider)
        self.executor = LuaBoxExecutor(instance.runtime, box_provider, access_provider)
        self.executor.on_connect = self.sessions.connected
        self.executor.on_auth = self.sessions.on_auth
        self.executor.on_disconnect_hooks.append(self.sessions.disconnected)
        self.server: IprotoServer | None = None
        self.uri: str | None = None          # box.cfg.listen as applied
        self.started = False                 # the first box.cfg has run

    # ------------------------------------------------------------- box.cfg

    def apply_listen(self, value: Any) -> None:
        """Bind at once, also during the first box.cfg: peers must reach this
        instance (VOTE, JOIN) while it bootstraps a replica set with them; until
        box.cfg is done other requests get ER_LOADING."""
        uri = None if value in (None, "") else str(value)
        self._rebind(uri)
        self.uri = uri

    def apply_readahead(self, value: Any) -> None:
        if self.server is not None and value:
            self.server.readahead = int(value)

    def apply_net_msg_max(self, value: Any) -> None:
        if self.server is not None and value:
            self.server.net_msg_max = int(value)

    def on_first_configure(self, values: dict) -> None:
        self.started = True
        # the value box.cfg settled on (a failed first box.cfg may have left
        # another one in self.uri)
        listen = values.get("listen")
        if listen not in (None, "") and (self.uri != str(listen) or self.server is None):
            self._rebind(str(listen))
            self.uri = str(listen)

    def on_first_configure_failed(self) -> None:
        """A failed first box.cfg leaves nothing listening."""
        if self.server is not None:
            self.server.stop_listening()
        self.uri = None

    # --------------------------------------------------------------- server

    def _rebind(self, uri: str | None) -> None:
        """Move the listening socket (2.6.0 closes the old one first); connections
        already accepted stay. If the new address cannot be bound, the old one is
        bound again when possible and the error goes to box.cfg."""
        server, old_uri = self.server, self.uri
        if server is None:
            if uri is None:
                return
            server = self.server = IprotoServer(self.sched, self.executor,
                                                **self._server_options())
        server.stop_listening()
        if uri is None:
            return
        try:
            self._bind(server, uri)
        except BaseException:
            if old_uri is not None:
                try:
                    self._bind(server, old_uri)
                except Exception as exc:   # noqa: BLE001 - the new error matters more
                    log.error("binary: cannot listen on %s again: %s", old_uri, exc)
            raise

    @staticmethod
    def _bind(server: IprotoServer, uri: str) -> None:
        server.host, server.requested_port = parse_listen(uri)
        try:
            server.start()
        except OSError as exc:
            log.error("binary: failed to bind on %s: %s", uri, exc)
            raise SocketError("binary: failed to bind, called on fd -1") from None

    def _server_options(self) -> dict:
        config = getattr(getattr(self.instance, "box", None), "config", None)
        values = config.as_dict() if config is not None and config.configured else {}
        options = {}
        if values.get("readahead"):
            options["readahead"] = int(values["readahead"])
        if values.get("net_msg_max"):
            options["net_msg_max"] = int(values["net_msg_max"])
        return options

    def listen_address(self) -> str | None:
        """box.info.listen: the bound address ('unix/:(socket)' for a unix socket)."""
        server = self.server
        if server is None or server._listener is None:
            return None
        if server.host == UNIX_HOST:
            return "unix/:(socket)"
        return server.uri

    def stop(self) -> None:
        """Stop listening and close every connection (call from a fiber)."""
        server, self.server = self.server, None
        if server is not None:
            server.stop()


def install(instance) -> IprotoService:
    """Serve IPROTO for the instance's box (lua/box BoxStorage: `instance.storage`,
    whose Box and Access are looked up per request: a failed start replaces them)."""
    service = IprotoService(instance, lambda: instance.storage.box,
                            lambda: instance.storage.access)
    instance.iproto = service
    instance.box.appliers["listen"] = service.apply_listen
    instance.box.appliers.setdefault("readahead", service.apply_readahead)
    instance.box.appliers.setdefault("net_msg_max", service.apply_net_msg_max)
    instance.box.on_first_configure.append(service.on_first_configure)
    instance.box.on_first_configure_failed.append(service.on_first_configure_failed)
    service.sessions.install(instance.runtime.globals[b"box"],   # before box.cfg, as 2.6.0
                             instance.storage.spaces.trigger_reset)
    return service
