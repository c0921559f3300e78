"""Tarantool's `popen` module (lua/modules/popen.lua): child processes with pipes.

Children are started with Python's subprocess (argv[0] used as execve would take it:
no PATH search); their pipes are non-blocking and read and written through the
scheduler, and the wait for their exit watches a pidfd, so each blocks only its fiber.
Errors are 2.6.0's: IllegalParams for misuse, TimedOut, SystemError.
"""
from __future__ import annotations

import errno
import os
import signal
from typing import TYPE_CHECKING

from spindle.core.fiber.coio import run_in_thread
from spindle.core.iproto.errors import BoxError, TimedOut

from ..runtime import Multi, read_source
from .socket import wait_ready

if TYPE_CHECKING:
    import subprocess

_READ_SIZE = 65536
_INFINITY = 1e8          # seconds past which a Lua timeout means "no timeout"


class IllegalParams(BoxError):
    type = "IllegalParams"


class PopenSystemError(BoxError):
    type = "SystemError"


def _signal_names() -> dict[str, int]:
    names = {}
    for name in dir(signal):
        # (SIGCLD is Linux's other name of SIGCHLD, which 2.6.0's table leaves out)
        if name.startswith("SIG") and not name.startswith("SIG_") and name.isupper() \
                and name != "SIGCLD":
            value = getattr(signal, name)
            if isinstance(value, int) and 0 < value < 32:
                names[name] = int(value)
    return names


SIGNALS = _signal_names()
_SIGNAL_OF = {number: name for name, number in sorted(SIGNALS.items(), reverse=True)}
_SIGNAL_OF.update({int(s): s.name for s in signal.Signals if 0 < int(s) < 32})

def _quoted(arg: str) -> str:
    """An argument as 2.6.0's command text shows it: in single quotes when it has a
    space, as it is otherwise (no escaping)."""
    return f"'{arg}'" if " " in arg else arg


class Handle:
    def __init__(self, process: subprocess.Popen, command: str, opts: dict):
        self.process = process
        self.command = command
        self.opts = opts
        self.pipes = {"stdin": process.stdin, "stdout": process.stdout,
                      "stderr": process.stderr}
        for pipe in self.pipes.values():
            if pipe is not None:
                os.set_blocking(pipe.fileno(), False)
        self.closed = False
        self.poll_queued = False
        try:
            self.pidfd: int | None = os.pidfd_open(process.pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def status(self) -> list:
        """[state, exit code | signal number, signal name]: popen.lua makes the
        table (a table made in Lua lists its keys in 2.6.0's order)."""
        code = self.process.returncode
        if code is None:
            return ["alive"]
        if code < 0:
            return ["signaled", -code, _SIGNAL_OF.get(-code)]
        return ["exited", code]


class PopenModule:
    def __init__(self, runtime):
        self.runtime = runtime
        self.sched = runtime.sched
        self.handles: dict[int, Handle] = {}
        self._next_id = 0
        natives = {name: getattr(self, name) for name in (
            "info", "field", "signal", "shutdown", "close", "reap", "illegal")}
        blocking = {"new": self.new, "read": self.read, "write": self.write,
                    "wait": self.wait}
        chunk = runtime.load(read_source("modules/popen.lua"), "@builtin/popen.lua")
        bridge = runtime.bridge
        self.lua_module = chunk(runtime.table({k: bridge(v) for k, v in natives.items()}),
                                runtime.table(blocking), runtime.wait,
                                runtime.to_lua(SIGNALS))

    @staticmethod
    def illegal(message: str):
        raise IllegalParams(message)

    # ------------------------------------------------------------- spawning

    def new(self, argv, opts) -> int:
        """Start a child (in a helper thread: a fork and exec from Python takes
        milliseconds, which other fibers should not wait for)."""
        import subprocess       # (imported on first use: ~10 ms off every start)
        argv, opts = self.runtime.to_py(argv), self.runtime.to_py(opts)
        stdio = {}
        for name in ("stdin", "stdout", "stderr"):
            stdio[name] = {"inherit": None, "devnull": subprocess.DEVNULL,
                           "close": None, "pipe": subprocess.PIPE}[opts[name]]
        argv = [str(a) for a in argv]
        if opts["shell"]:
            command_argv = ["sh", "-c", *argv]
            executable = "/bin/sh"
        else:
            command_argv = argv
            # execve takes a name without a slash relative to the directory
            executable = "" if not argv else \
                argv[0] if "/" in argv[0] else os.path.join(".", argv[0])
        env = opts.get("env")
        closed = [name for name in ("stdin", "stdout", "stderr") if opts[name] == "close"]

        def child_setup():
            for number, name in enumerate(("stdin", "stdout", "stderr")):
                if name in closed:
                    os.close(number)

        kwargs = dict(stdin=stdio["stdin"], stdout=stdio["stdout"], stderr=stdio["stderr"],
                      close_fds=bool(opts["close_fds"]),
                      restore_signals=bool(opts["restore_signals"]),
                      start_new_session=bool(opts["setsid"]),
                      env=None if env is None else {str(k): str(v) for k, v in env.items()},
                      preexec_fn=child_setup if closed else None)
        try:
            if not executable:
                raise FileNotFoundError(errno.ENOENT, "no program")
            process = run_in_thread(self.sched, lambda: subprocess.Popen(
                command_argv, executable=executable, **kwargs))
        except OSError as exc:
            # 2.6.0 forks first: the child whose execve failed exits with its errno
            code = exc.errno or 1
            process = run_in_thread(self.sched, lambda: subprocess.Popen(
                ["sh", "-c", f"exit {code}"], executable="/bin/sh", **kwargs))
        self._next_id += 1
        self.handles[self._next_id] = Handle(process, " ".join(map(_quoted, command_argv)),
                                             opts)
        return self._next_id

    def _handle(self, hid: int) -> Handle:
        handle = self.handles.get(int(hid))
        if handle is None or handle.closed:
            raise IllegalParams("popen: attempt to operate on a closed handle")
        return handle

    def _poll(self, handle: Handle) -> None:
        if handle.process.returncode is None:
            handle.process.poll()

    def _observe(self, handle: Handle) -> None:
        """Look for the child's exit at the loop's next turn: 2.6.0 learns of it
        from SIGCHLD in its event loop, so code that does not yield keeps seeing
        the child alive (and its pid)."""
        if handle.process.returncode is None and not handle.poll_queued:
            handle.poll_queued = True

            def look():
                handle.poll_queued = False
                if not handle.closed:
                    self._poll(handle)
            self.sched.call_soon(look)

    # ------------------------------------------------------------ reading

    def _pipe_of(self, handle: Handle, name: str):
        if handle.opts[name] != "pipe":
            raise IllegalParams("popen: handle does not support the requested IO operation")
        pipe = handle.pipes[name]
        if pipe is None:
            raise IllegalParams("popen: attempt to operate on a closed file descriptor")
        return pipe

    def read(self, hid, name, timeout):
        handle = self._handle(hid)
        pipe = self._pipe_of(handle, name.decode() if isinstance(name, bytes) else name)
        deadline = None if timeout is None or timeout > _INFINITY else \
            self.sched.clock() + max(float(timeout), 0.0)
        fd = pipe.fileno()
        while True:
            try:
                return os.read(fd, _READ_SIZE)
            except BlockingIOError:
                pass
            remaining = None if deadline is None else deadline - self.sched.clock()
            if remaining is not None and remaining <= 0:
                return Multi((None, self.runtime.error_to_lua(TimedOut())))
            if not wait_ready(self.sched, fd, 1, remaining):
                self.sched.current.testcancel()
                return Multi((None, self.runtime.error_to_lua(TimedOut())))
            self.sched.current.testcancel()
            if handle.closed or handle.pipes[name if isinstance(name, str)
                                             else name.decode()] is None:
                raise IllegalParams("popen: attempt to operate on a closed file descriptor")

    def write(self, hid, data, timeout):
        handle = self._handle(hid)
        pipe = self._pipe_of(handle, "stdin")
        deadline = None if timeout is None or timeout > _INFINITY else \
            self.sched.clock() + max(float(timeout), 0.0)
        fd, view = pipe.fileno(), memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                return Multi((None, self.runtime.error_to_lua(_system_error(errno.EPIPE))))
            remaining = None if deadline is None else deadline - self.sched.clock()
            if remaining is not None and remaining <= 0 or \
                    not wait_ready(self.sched, fd, 2, remaining):
                self.sched.current.testcancel()
                return Multi((None, self.runtime.error_to_lua(TimedOut())))
            self.sched.current.testcancel()
        return True

    # ----------------------------------------------------- process state

    def wait(self, hid):
        handle = self._handle(hid)
        while True:
            self._poll(handle)
            if handle.process.returncode is not None:
                return self.runtime.to_lua(handle.status())
            if handle.pidfd is not None:
                self.sched.wait_io(handle.pidfd, 1, None)
            else:
                self.sched.sleep(0.01)
            self.sched.current.testcancel()
            if handle.closed:
                raise IllegalParams("popen: attempt to operate on a closed handle")

    def field(self, hid, key: str):
        """ph.<key>: pid (nil once the child is gone), command, opts, status, and
        the state of each pipe ('open', 'closed'; nil for one that is not a pipe)."""
        handle = self.handles.get(int(hid))
        if handle is None or handle.closed:
            raise IllegalParams("Attempt to index a closed popen handle")
        if key == "serialize":
            return self.info(hid)
        self._observe(handle)
        if key == "pid":
            # nil once the exit has been seen, as 2.6.0's pid goes when its
            # SIGCHLD has been handled
            return handle.process.pid if handle.process.returncode is None else None
        if key == "command":
            return handle.command
        if key == "opts":
            return self._opts(handle)
        if key == "status":
            return handle.status()
        if key in ("stdin", "stdout", "stderr"):
            if handle.opts[key] != "pipe":
                return None
            return "open" if handle.pipes[key] is not None else "closed"
        return None

    @staticmethod
    def _opts(handle: Handle) -> dict:
        opts = {name: handle.opts[name] for name in (
            "stdin", "stdout", "stderr", "shell", "setsid", "close_fds",
            "restore_signals", "group_signal", "keep_child")}
        return {k: (bool(v) if k not in ("stdin", "stdout", "stderr") else v)
                for k, v in opts.items()}

    def info(self, hid) -> dict:
        handle = self._handle(hid)
        self._observe(handle)
        info = {"command": handle.command, "opts": self._opts(handle),
                "status": handle.status()}
        if handle.process.returncode is None:
            info["pid"] = handle.process.pid
        for name in ("stdin", "stdout", "stderr"):
            state = self.field(hid, name)
            if state is not None:
                info[name] = state
        return info

    def signal(self, hid, signo):
        # an exited child not yet collected takes the signal, as in 2.6.0
        handle = self._handle(hid)
        if handle.process.returncode is not None:
            error = _system_error(errno.ESRCH)
            error.message = (f"Attempt to send a signal {int(signo)} to a process "
                             "that does not exist anymore")
            return Multi((None, self.runtime.error_to_lua(error)))
        try:
            if handle.opts["group_signal"]:
                os.killpg(handle.process.pid, int(signo))
            else:
                os.kill(handle.process.pid, int(signo))
        except OSError as exc:
            return Multi((None, self.runtime.error_to_lua(_system_error(exc.errno))))
        return True

    def shutdown(self, hid, names: list) -> bool:
        handle = self._handle(hid)
        for name in names:
            if handle.opts[name] != "pipe":
                raise IllegalParams(
                    "popen: handle does not support the requested IO operation")
        for name in names:
            pipe = handle.pipes[name]
            if pipe is not None:
                self.sched.forget_io(pipe.fileno())
                pipe.close()
                handle.pipes[name] = None
        return True

    def close(self, hid) -> bool:
        handle = self.handles.pop(int(hid), None)
        if handle is None:
            return True
        handle.closed = True
        for name, pipe in handle.pipes.items():
            if pipe is not None:
                self.sched.forget_io(pipe.fileno())
                pipe.close()
                handle.pipes[name] = None
        process = handle.process
        if not handle.opts["keep_child"] and process.poll() is None:
            try:
                if handle.opts["group_signal"]:
                    os.killpg(process.pid, signal.SIGKILL)
                else:
                    process.kill()
            except OSError:
                pass
        if handle.pidfd is not None:
            self.sched.forget_io(handle.pidfd)
            os.close(handle.pidfd)
        _reap_later(process)
        return True

    def reap(self, ids: list) -> None:
        """Close the handles whose Lua objects were collected."""
        for hid in ids or ():
            self.close(hid)


_zombies: list = []


def _reap_later(process: subprocess.Popen) -> None:
    """Collect exit statuses of closed handles' children without waiting for them."""
    _zombies.append(process)
    _zombies[:] = [p for p in _zombies if p.poll() is None]


def _system_error(code: int) -> PopenSystemError:
    error = PopenSystemError(os.strerror(code))
    error.errno = code
    return error


def build(instance):
    return PopenModule(instance.runtime).lua_module
