"""Tarantool's `fiber` module for Lua, on Spindle's scheduler (lua/modules/fiber.lua)."""
from __future__ import annotations

import time

from spindle.core.fiber import Channel, Cond, Fiber
from spindle.core.iproto.errors import BoxError

from ..runtime import LuaRuntime, Multi, read_source


class FiberModule:
    def __init__(self, runtime: LuaRuntime):
        self.runtime = runtime
        self.sched = runtime.sched
        self._joinable: dict[int, Fiber] = {}
        bridge = runtime.bridge
        natives = {
            "self": lambda: self._current().id,
            "status": lambda fid: self._state(fid),
            "name": lambda fid: self._fiber(fid).name,
            "set_name": lambda fid, name, truncate: self._fiber(fid).set_name(name, bool(truncate)),
            "cancel": self._cancel,
            "wakeup": lambda fid: self._fiber(fid).wakeup(),
            "set_joinable": self._set_joinable,
            "testcancel": lambda: self._current().testcancel(),
            "exists": lambda fid: fid in self.sched.fibers,
            "info": self._info,
            "time": lambda: self.sched.wall_time,
            "time64": lambda: int(self.sched.wall_time * 1_000_000),
            "clock": time.monotonic,
            "clock64": lambda: time.monotonic_ns() // 1000,
            "cond_new": lambda: Cond(self.sched),
            "cond_signal": lambda cond: cond.signal(),
            "cond_broadcast": lambda cond: cond.broadcast(),
            "channel_new": lambda size: Channel(self.sched, int(size)),
            "channel_close": lambda ch: ch.close(),
            "channel_is_closed": lambda ch: ch.closed,
            "channel_count": lambda ch: ch.count(),
            "channel_size": lambda ch: ch.size,
            "channel_is_full": lambda ch: ch.is_full(),
            "channel_is_empty": lambda ch: ch.is_empty(),
            "channel_has_readers": lambda ch: ch.has_readers(),
            "channel_has_writers": lambda ch: ch.has_writers(),
        }
        # Run only through wait(): they may park the fiber, and the Lua values they
        # receive (functions, channel payloads) arrive anchored on the main state.
        blocking = {
            "sleep": self.sched.sleep,
            "create": lambda fn, *args: self._spawn(fn, args, start=True),
            "new": lambda fn, *args: self._spawn(fn, args, start=False),
            "join": self._join,
            "cond_wait": lambda cond, timeout=None: cond.wait(timeout),
            "channel_put": lambda ch, value, timeout=None: ch.put(value, timeout),
            "channel_get": lambda ch, timeout=None: ch.get(timeout),
        }
        chunk = runtime.load(read_source("modules/fiber.lua"), "@fiber.lua")
        self.lua_module, self._drop_storage = chunk(
            runtime.table({k: bridge(v) for k, v in natives.items()}),
            runtime.table(blocking), runtime.wait)

    def _current(self) -> Fiber:
        fiber = self.sched.current
        if fiber is None:
            raise BoxError("not in a fiber")
        return fiber

    def _fiber(self, fid: int) -> Fiber:
        fiber = self.sched.fibers.get(fid)
        if fiber is None:
            raise BoxError("the fiber is dead")
        return fiber

    def _set_joinable(self, fid: int, yes) -> None:
        fiber = self._fiber(fid)
        fiber.set_joinable(bool(yes))
        # A joinable fiber stays findable after death until someone joins it.
        if fiber.joinable:
            self._joinable[fid] = fiber
        else:
            self._joinable.pop(fid, None)

    def _state(self, fid: int) -> str:
        fiber = self.sched.fibers.get(fid) or self._joinable.get(fid)
        return fiber.state() if fiber else "dead"

    def _cancel(self, fid: int) -> None:
        self.sched.cancel(self._fiber(fid))

    def _spawn(self, fn, args: tuple, start: bool) -> int:
        fiber = self.sched.spawn(self.run_lua_body, fn, args, name="lua", start=start)
        return fiber.id

    def run_lua_body(self, fn, args: tuple) -> tuple:
        fiber = self.sched.current
        fiber.on_exit.append(lambda f: self._drop_storage(f.id))
        return self.runtime.call(fn, *args)

    def _join(self, fid: int) -> Multi:
        fiber = self._joinable.get(fid) or self.sched.fibers.get(fid)
        if fiber is None:
            raise BoxError("the fiber is dead")
        ok, value = fiber.join()
        self._joinable.pop(fid, None)
        if ok:
            return Multi((True, *value))
        return Multi((False, self.runtime.error_to_lua(value)))

    def _info(self) -> dict:
        return {fiber.id: {"fid": fiber.id, "name": fiber.name, "csw": fiber.csw,
                           "memory": {"total": 0, "used": 0}}
                for fiber in self.sched.fibers.values()}
