"""Runs one instance for the CLI: the scheduler loop, the main fiber, the console.

Exit rules, as Tarantool's: a script that raises ends the process at once with status
1 and the error on stderr; os.exit(n) ends it with n; otherwise the process
lives while fibers, listeners or timers do; leaving the console (Ctrl-D, \\quit) exits.
SIGTERM and SIGINT end it with status 0 (signals.py has the signals).
"""
from __future__ import annotations

import gc
import os
import sys
import threading

from spindle.core import log
from spindle.core.iproto.errors import BoxError
from spindle.lua.instance import Instance, LuaLoadError

from .recovery_bar import RecoveryBar
from .signals import InstanceSignals
from .spark_progress import SparkProgressBar


# The collector's default (700, 10, 10) collects the objects of transactions that are
# waiting for their WAL write (~20 each) and promotes them, so full passes over the
# whole heap come often under write load: ~a quarter of a replica's CPU per row
# (scripts/bench/replica_apply.py: 22.7 -> 17.7 us per row at 1 row/txn with these).
# Young generations of this size are still collected within milliseconds.
COLLECTOR_THRESHOLDS = (20_000, 20, 20)


class Launcher:
    def __init__(self, script: str | None, script_args: list[str],
                 actions: list[tuple[str, str]], interactive: bool, from_stdin: bool = False,
                 connect_uri: str | None = None):
        gc.set_threshold(*COLLECTOR_THRESHOLDS)
        self.script, self.script_args = script, script_args
        self.actions, self.interactive = actions, interactive
        self.from_stdin = from_stdin
        self.connect_uri = connect_uri      # `spindle connect URI`: the console's peer
        self.instance = Instance()
        self.instance.console_frontend = self._run_console   # console.start()
        self.sched = self.instance.sched
        self._recovery_bar = RecoveryBar()
        storage = self.instance.storage
        storage.recovery_progress_hooks.append(self._recovery_bar)
        storage.box.on_recovery_progress.append(self._recovery_bar)
        self._spark_bar = SparkProgressBar()
        storage.spark.progress_hooks.append(self._spark_bar)
        self.signals = InstanceSignals(self.instance)

    @property
    def stop_signal(self) -> int | None:
        """SIGTERM or SIGINT when one of them ended the instance."""
        return self.signals.stop_signal

    def run(self) -> int:
        status = 0
        self.signals.install()
        try:
            self.sched.run(self._main, name="main")
        except KeyboardInterrupt:
            status = 130
        except BaseException as exc:   # noqa: BLE001 - reported like Tarantool does
            if self.instance.exit_code is None:
                report_fatal(exc)
                status = 1
        finally:
            self.sched.shutdown(timeout=2.0)
            self._stop_box()
            self.signals.restore()
        if self.instance.exit_code is not None:
            status = self.instance.exit_code
        sys.stdout.flush()
        return status

    def _stop_box(self) -> None:
        """Close the WAL (EOF marker, the next xlog named by the final vclock) and
        stop the checkpoint daemon once no fiber can write any more; then end
        box.spark's jobs, SparkSession and JVM (spark.stop() alone leaves the JVM)."""
        try:
            self.instance.storage.stop()
        except Exception as exc:   # noqa: BLE001 - exiting anyway
            print(f"error while stopping the box: {exc}", file=sys.stderr)
        try:
            self.instance.storage.spark.shutdown()
            self._spark_bar.close()
        except Exception as exc:   # noqa: BLE001 - exiting anyway
            print(f"error while stopping Spark: {exc}", file=sys.stderr)

    def _main(self) -> None:
        self.instance.set_arg(self.script if self.script else sys.argv[0], self.script_args)
        for kind, value in self.actions:      # -e and -l, in command-line order
            if kind == "chunk":
                self.instance.run_chunk(value, "=(command line)")
            else:
                self.instance.require_global(value)
        if self.from_stdin:
            self.instance.run_stdin(self.script_args)
        elif self.script:
            self.instance.run_script(self.script, self.script_args)
        if self.interactive:
            self._console()
            self.sched.stop()

    def _console(self) -> None:
        # Imported here: a script that never enters the console starts without them
        # (the console engine brings the YAML renderer, the link concurrent.futures).
        from spindle.lua.console import ConsoleEngine
        engine = ConsoleEngine(self.instance)
        if self.connect_uri is not None:
            engine.end_with_remote = True     # the peer gone, nothing is left to do
            try:
                self.instance.console.connect_engine(engine, self.connect_uri)
            except BoxError as exc:   # said as tarantoolctl connect says it
                print(exc.message)
                self.instance.exit_code = 1
                return
        self.instance.console.enter_repl(engine)     # box.session.type() == 'repl'
        self._run_console(engine)

    def _run_console(self, engine) -> None:
        """The console's front end on this terminal (or pipe) for `engine`, until
        the user leaves it; the calling fiber serves its statements."""
        from .link import TxLink
        link = TxLink(engine)
        if sys.stdin.isatty() and os.environ.get("SPINDLE_PLAIN_CONSOLE") != "1":
            from .repl import run_repl as frontend
        else:
            from .pipe import run_pipe_console as frontend
        thread = threading.Thread(target=frontend, args=(link,), name="repl", daemon=True)
        thread.start()
        link.serve()


def report_fatal(exc: BaseException) -> None:
    """What Tarantool prints when a script fails: the error as error_log() writes
    it (no Lua traceback: 2.6.0 prints none), then the fatal line."""
    if isinstance(exc, BoxError):
        text = exc.log_text()
    elif isinstance(exc, LuaLoadError):
        text = f"{exc.type}: {exc.message}"
    else:   # a fault of Spindle's own: said in Tarantool's terms, not Python's
        text = f"SystemError: {exc}"
    if log.booting:     # (the boot logger's plain lines, on stderr)
        sys.stderr.write(text + "\n")
        sys.stderr.write("fatal error, exiting the event loop\n")
        sys.stderr.flush()
        return
    # through the logger, where the error was made first (as `utils.c:1005 E>`)
    file, line = getattr(exc, "file", ""), getattr(exc, "line", 0)
    log.say(log.ERROR, "%s", text, where=f"{os.path.basename(file)}:{line}" if file else None)
    log.say(log.FATAL, "fatal error, exiting the event loop")
