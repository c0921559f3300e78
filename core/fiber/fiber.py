"""One fiber: identity, status, cancellation, join and fiber-local storage.

The greenlet that runs a fiber belongs to the scheduler's pool; a Fiber only borrows
one from its first run until it dies.
"""
from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any, Callable

import greenlet

from spindle.core import log
from spindle.core.iproto.errors import BoxError, FiberIsCancelled

if TYPE_CHECKING:
    from .scheduler import Scheduler

FIBER_NAME_MAX = 256   # Tarantool 2.6's limit, including the terminating zero


class FiberSwitchForbidden(BoxError):
    """A fiber switch was attempted while a Lua call is on the greenlet's stack."""

    def __init__(self):
        super().__init__("fiber yield is not allowed here")


class Fiber:
    __slots__ = ("id", "name", "sched", "status", "cancelled", "joinable", "csw",
                 "storage", "on_exit", "_fn", "_args", "_kwargs", "_greenlet", "_ready",
                 "_timed_out", "_wait_token", "_result", "_error", "_joiners", "__weakref__")

    def __init__(self, sched: Scheduler, fid: int, name: str, fn: Callable,
                 args: tuple, kwargs: dict):
        self.id = fid
        self.name = name[:FIBER_NAME_MAX - 1]
        self.sched = sched
        self.status = "suspended"     # Tarantool shows running / suspended / dead
        self.cancelled = False
        self.joinable = False
        self.csw = 0                  # context switches, as fiber.info() reports
        self.storage: dict = {}       # fiber-local storage for Python code
        self.on_exit: list[Callable[[Fiber], None]] = []
        # dropped when the fiber dies: a dead fiber must not keep its closure alive
        self._fn: Callable | None = fn
        self._args: tuple | None = args
        self._kwargs: dict | None = kwargs
        self._greenlet: greenlet.greenlet | None = None
        self._ready = False
        self._timed_out = False
        self._wait_token = 0
        self._result: Any = None
        self._error: BaseException | None = None
        self._joiners: list[Fiber] = []

    def __repr__(self) -> str:
        return f"<Fiber {self.id} {self.name!r} {self.status}>"

    # ------------------------------------------------------------------ run

    def _run(self) -> None:
        self.status = "running"
        fn, args, kwargs = self._fn, self._args, self._kwargs
        # a fiber runs once: only _finish, after the run, clears them
        assert fn is not None and args is not None and kwargs is not None
        try:
            self._result = fn(*args, **kwargs)
        except greenlet.GreenletExit as exc:   # killed at shutdown, or os.exit()
            self._error = exc
            self._finish()
            raise
        except BaseException as exc:   # noqa: BLE001 - a fiber's error ends only the fiber
            self._error = exc
            if not self.joinable and not isinstance(exc, FiberIsCancelled):
                self._log_error(exc)
        self._finish()

    def _finish(self) -> None:
        self.status = "dead"
        self._fn = self._args = self._kwargs = None
        for joiner in self._joiners:
            self.sched.wakeup(joiner)
        self._joiners.clear()
        for callback in self.on_exit:
            try:
                callback(self)
            except Exception as exc:
                log.error("fiber exit trigger failed: %s", exc)
        self.on_exit.clear()
        self.storage.clear()

    def _log_error(self, exc: BaseException) -> None:
        """A fiber's uncaught error, as 2.6.0 logs it (error_log: `LuajitError:
        ...`, no Lua traceback). A fault of Spindle's own is said in Tarantool's
        terms; its Python traceback goes to the debug level only."""
        if isinstance(exc, BoxError):
            log.error("%s", exc.log_text())
            return
        log.error("SystemError: %s", exc)
        log.debug("%s", "".join(traceback.format_exception(exc)).rstrip())

    # ------------------------------------------------------- user-facing API

    def set_name(self, name: str, truncate: bool = False) -> None:
        # a name's bytes, as 2.6.0 keeps them: a Lua string that is not UTF-8 comes
        # with surrogate escapes, and a cut character keeps its first bytes
        data = name.encode("utf-8", "surrogateescape")
        if len(data) >= FIBER_NAME_MAX and not truncate:
            raise BoxError("Fiber name is too long")
        self.name = data[:FIBER_NAME_MAX - 1].decode("utf-8", "surrogateescape")

    def state(self) -> str:
        if self.status == "dead":
            return "dead"
        return "running" if self is self.sched.current else "suspended"

    def set_joinable(self, joinable: bool) -> None:
        self.joinable = bool(joinable)

    def testcancel(self) -> None:
        """Raise FiberIsCancelled if this fiber was cancelled (the flag is sticky)."""
        if self.cancelled:
            raise FiberIsCancelled()

    def cancel(self) -> None:
        self.sched.cancel(self)

    def wakeup(self) -> None:
        self.sched.wakeup(self)

    def join(self) -> tuple[bool, Any]:
        """Wait for a joinable fiber to die: (True, result) or (False, error)."""
        if not self.joinable:
            raise BoxError("the fiber is not joinable")
        me = self.sched.current
        if me is self:
            raise BoxError("the fiber can't join itself")
        while self.status != "dead":
            if me is None:
                # (sched.wait's own error; raised before `None` could join _joiners)
                raise RuntimeError("blocking call outside of a fiber")
            self._joiners.append(me)
            self.sched.wait(None)
            if me in self._joiners:
                self._joiners.remove(me)
        self.joinable = False   # a fiber is joined once
        if self._error is not None:
            return False, self._error
        return True, self._result
