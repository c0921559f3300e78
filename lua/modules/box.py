"""The `box` global for Lua: box.cfg over core/box/cfg.py, box.NULL and box.error.

box.cfg is served as a wait-request (the first call will recover or bootstrap the
database, which blocks the fiber); applying an option's side effect goes through
`BoxModule.appliers`, where the storage and replication layers register theirs.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from spindle.core import log
from spindle.core.box import stat
from spindle.core.box.cfg import Config
from spindle.core.fiber import Cond
from spindle.core.iproto.errors import LUA_HIDDEN_CODES, MESSAGES, ErrorCode
from spindle.core.version import VERSION_STRING

from .. import errors as lua_errors
from ..runtime import read_source


def _count_error() -> None:
    """A ClientError made in Lua (box.error.new, box.error(code/table)): 2.6.0's
    ClientError constructor counts each in box.stat().ERROR."""
    stat.REQUESTS[stat.ERROR] += 1


class BoxModule:
    def __init__(self, instance):
        self.instance = instance
        self.runtime = runtime = instance.runtime
        self.config = Config()
        # option name -> fn(value): side effects of a (re)configured option
        self.appliers: dict[str, Callable[[Any], None]] = {
            "log_level": log.set_level,
            "log_format": log.set_format,
        }
        # hooks run once after the first successful box.cfg (storage bootstrap...)
        self.on_first_configure: list[Callable[[dict], None]] = []
        self.on_first_configure_failed: list[Callable[[], None]] = []
        self._first_cfg: Cond | None = None       # while the first box.cfg runs
        natives = {
            "template": lambda code: MESSAGES.get(int(code), "Unknown error"),
            "last_error": self._last_error,
            "clear_error": self._clear_error,
            "configured": lambda: self.config.configured,
            "count_error": _count_error,
        }
        bridges = {k: runtime.bridge(v) for k, v in natives.items()}
        # (gets the box.error object itself, read at once and not kept)
        bridges["set_last"] = runtime.bridge(self._set_last, convert_args=False)
        codes = {member.name[3:]: int(member) for member in ErrorCode
                 if member not in LUA_HIDDEN_CODES}
        chunk = runtime.load(read_source("modules/box.lua"), "@box.lua")
        self._blocking = runtime.table({"configure": self._configure})
        self.lua_module = chunk(
            runtime.table(bridges),
            self._blocking,
            runtime.wait, runtime.convert.NULL, runtime.to_lua(codes),
            runtime._error_helpers)
        # The database and the rest of the box table (lua/box): box.cfg starts it.
        from ..box import BoxStorage
        self.storage = BoxStorage(self)
        self.appliers.update(self.storage.appliers())

    # ------------------------------------------------------------------ box.cfg

    def _configure(self, options=None) -> Any:
        """box.cfg(options). As 2.6.0's `locked`, a call from another fiber while
        the first one loads the box (its recovery yields) waits for it to end."""
        while self._first_cfg is not None:
            self._first_cfg.wait()
        if self.config.configured:
            return self._configure_locked(options)
        self._first_cfg = Cond(self.runtime.sched)
        try:
            return self._configure_locked(options)
        finally:
            done, self._first_cfg = self._first_cfg, None
            done.broadcast()

    def _configure_locked(self, options) -> Any:
        options = self.runtime.to_py(options) if options is not None else None
        if isinstance(options, list) and not options:
            options = {}
        if not self.config.configured:
            values = self.config.first_configure(options)
            given = options or {}
            from ..box.process import ProcessPanic
            try:
                self.storage.process.prepare(values)    # work_dir, background, pid_file
            except ProcessPanic as panic:
                sys.stderr.write(f"{panic}\n")          # before the logger, as 2.6.0
                self.instance.exit_now(1)
            # known before `listen` binds: the greeting carries it from the start
            self.storage.box.expected_instance_uuid(values)
            try:
                # As 2.6.0 sets up its logger before it reports any option: with
                # log_level = 2 not even the log_level line is printed.
                # Its log file too: the option lines go there.
                early = [name for name in ("log_level", "log") if given.get(name) is not None]
                for name in early:
                    self._apply(name, values[name])
                # say_logger_init, then what 2.6.0 says first
                log.init_std()
                log.crit("Tarantool %s", VERSION_STRING)
                log.crit("log level %d", log.level)
                for name, value in values.items():
                    if name in given and given[name] is not None:
                        log.info("set '%s' configuration option to %s", name, Shown(value, name))
                        if name not in early:
                            self._apply(name, value)
                self.storage.process.start()  # detach (background), write the pid
                # box.cfg is the table of values while the box loads (recovery
                # yields): what runs meanwhile reads it, or calls it and waits
                self.runtime.invoke(self._blocking[b"refresh"],
                                    lua_cfg_values(self.config.as_dict()))
                self.storage.start(values)    # returns when the box is up
            except BaseException:
                self.config = Config()        # a failed first box.cfg leaves nothing
                self.storage.stop()
                for hook in self.on_first_configure_failed:
                    hook()
                raise
            for hook in self.on_first_configure:
                hook(values)
        else:
            changed = self.config.reconfigure(options, apply=self._apply)
            for name, value in changed.items():
                log.info("set '%s' configuration option to %s", name, Shown(value, name))
        for warning in self.config.warnings:
            log.warn("%s", warning)
        self.config.warnings.clear()
        return self.runtime.to_lua(lua_cfg_values(self.config.as_dict()))

    def _apply(self, name: str, value: Any) -> None:
        applier = self.appliers.get(name)
        if applier is not None:
            applier(value)

    # ---------------------------------------------------------------- box.error

    # The last error is kept per fiber as the Python exception (a Lua object must not
    # be kept from a plain Lua->Python call) and turned into a box.error on demand.
    def _last_error(self):
        fiber = self.instance.sched.current
        exc = fiber.storage.get("last_error") if fiber else None
        return self.runtime.error_to_lua(exc) if exc is not None else None

    def _set_last(self, err) -> None:
        """box.error.set(err), and box.error(...) before it raises."""
        fiber = self.instance.sched.current
        if fiber:
            fiber.storage["last_error"] = lua_errors.error_from_lua(err, self.runtime.convert.text)

    def _clear_error(self) -> None:
        fiber = self.instance.sched.current
        if fiber:
            fiber.storage.pop("last_error", None)


class Shown:
    """An option's value as 2.6.0's "set 'x' configuration option to ..." line shows
    it: JSON, with the passwords of replication URIs left out. Formatted (and json
    imported) only when the line is printed: log_level = 2 prints none."""

    __slots__ = ("value", "name")

    def __init__(self, value: Any, name: str = ""):
        self.value, self.name = value, name

    def __str__(self) -> str:
        import json
        value = self.value
        if self.name == "replication" and isinstance(value, (list, tuple)):
            value = [_without_password(uri) for uri in value]
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _without_password(uri: Any) -> Any:
    if not isinstance(uri, str) or "@" not in uri:
        return uri
    userinfo, _, rest = uri.rpartition("@")
    return f"{userinfo.partition(':')[0]}@{rest}"


def build(instance):
    module = BoxModule(instance)
    instance.box = module
    instance.storage = module.storage     # the database (lua/box), for other layers
    return module.lua_module


def lua_cfg_values(values: dict[str, Any]) -> dict[str, Any]:
    """box.cfg's values as 2.6.0's Lua holds them: an unset option is absent (nil,
    not the truthy box.NULL) and every number a Lua number, even one past 2^53
    (checkpoint_wal_threshold's default is 1e+18, not a uint64 cdata)."""
    return {name: float(value) if type(value) is int and abs(value) >= 2 ** 53 else value
            for name, value in values.items() if value is not None}

