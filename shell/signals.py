"""The signals of an instance's process, handled as Tarantool 2.6.0 handles them:

* SIGTERM and SIGINT end the process cleanly with status 0: box.ctl.on_shutdown
  triggers run (in a fiber), the loop stops, fibers are cancelled, the WAL is closed with its EOF marker (Launcher._stop_box). Only
  with `pid_file` configured (a daemon) the log says "got signal N - Name" first.
* SIGHUP reopens the log file by its name (logrotate renamed the old one away);
  with the log on stderr it does nothing. It never ends the process.
* SIGUSR1 takes a checkpoint (box.snapshot()) in a fiber named "checkpoint"; before
  box.cfg it does nothing.

The handlers are installed whatever the process inherited: a shell starts a
background job with SIGINT ignored, and Tarantool still stops on it.

Python runs a handler in the main thread between two bytecodes of whatever runs
there: a fiber, or the hub in the middle of its own bookkeeping. So the handler only
queues the work with `call_soon_threadsafe` (an append to a deque) and the hub does
it at its next turn; taking a lock inside the handler (the log's, the one a thread
start takes) could deadlock against the very code it interrupted.
"""
from __future__ import annotations

import signal

from spindle.core import log

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
HANDLED = STOP_SIGNALS + (signal.SIGHUP, signal.SIGUSR1)


class InstanceSignals:
    def __init__(self, instance):
        self.instance = instance
        self.sched = instance.sched
        self.stop_signal: int | None = None     # the signal that stopped the instance
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        for signum in HANDLED:
            self._previous[signum] = signal.signal(signum, self._on_signal)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _on_signal(self, signum, frame) -> None:
        self.sched.call_soon_threadsafe(self.handle, signum)

    def handle(self, signum: int) -> None:
        """On the hub, at its next turn after the signal arrived."""
        if signum in STOP_SIGNALS:
            self._stop(signum)
        elif signum == signal.SIGHUP:
            log.rotate()
        elif signum == signal.SIGUSR1:
            self.sched.spawn(self._checkpoint, name="checkpoint")

    def _stop(self, signum: int) -> None:
        if self._config().get("pid_file"):
            # A daemon's sudden end must be explained in its log.
            log.crit("got signal %d - %s", signum, signal.strsignal(signum))
        if self.stop_signal is None:
            self.stop_signal = signum
        if self.instance.exit_code is None:
            self.instance.exit_code = 0
        # box.ctl.on_shutdown triggers may yield: they run in a fiber, then the loop stops
        self.sched.spawn(self._shut_down, name="on_shutdown")

    def _shut_down(self) -> None:
        try:
            self.instance.run_shutdown_hooks()
        finally:
            self.sched.stop()

    def _checkpoint(self) -> None:
        storage = self.instance.storage
        if not storage.started:
            return
        try:
            storage.box.snapshot()
        except Exception as exc:   # noqa: BLE001 - logged, as Tarantool's diag_log
            log.error("%s", getattr(exc, "message", None) or exc)

    def _config(self) -> dict:
        try:
            return self.instance.storage.module.config.as_dict()
        except AttributeError:     # no box module in this instance
            return {}
