"""The process part of the first box.cfg, as 2.6.0's load_cfg does it before the
storage starts: `work_dir` must exist, `background` needs `log` and `pid_file`, the
pid file is created and locked (another live instance holding it is refused), then,
once the log is set up, `background` detaches the process and the pid file gets the
pid of the process that goes on. The pid file is removed when the instance stops.

Each refusal is a panic in 2.6.0: its message on stderr as a plain line (the logger
is not set up yet), exit status 1, whatever pcall is around box.cfg.
"""
from __future__ import annotations

import errno
import fcntl
import os
import sys


class ProcessPanic(Exception):
    """A refusal of the process options: the instance prints it and exits with 1."""


class ProcessOptions:
    def __init__(self) -> None:
        self.pid_path: str | None = None
        self._pid_fd: int | None = None
        self.background = False

    def prepare(self, values: dict) -> None:
        """Before the logger: check work_dir and background, create and lock the pid
        file (a relative path is in work_dir, as after 2.6.0's chdir)."""
        work_dir = values.get("work_dir")
        if work_dir and not os.path.isdir(work_dir):
            code = errno.ENOENT if not os.path.exists(work_dir) else errno.ENOTDIR
            raise ProcessPanic(f"can't chdir to `{work_dir}': {os.strerror(code)}")
        self.background = bool(values.get("background"))
        if self.background and not values.get("log"):
            raise ProcessPanic("'background' requires 'log' configuration option to be set")
        if self.background and not values.get("pid_file"):
            raise ProcessPanic(
                "'background' requires 'pid_file' configuration option to be set")
        pid_file = values.get("pid_file")
        if pid_file:
            self._open_pid_file(os.path.abspath(os.path.join(work_dir or ".", pid_file)))

    def _open_pid_file(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ProcessPanic(f"failed to create pid file '{path}': "
                               f"{os.strerror(exc.errno or 0)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise ProcessPanic(f"the daemon is already running: PID {other}") from None
        self._pid_fd, self.pid_path = fd, path

    def start(self) -> None:
        """After the logger: detach when `background` is on (the parent exits 0 at
        once, the child leaves the terminal's session and its standard streams go
        to /dev/null), then write this process's pid into the pid file."""
        if self.background:
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() != 0:
                os._exit(0)     # the parent: nothing of the instance is its to stop
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.close(devnull)
        if self._pid_fd is not None:
            os.ftruncate(self._pid_fd, 0)
            os.pwrite(self._pid_fd, str(os.getpid()).encode(), 0)

    def stop(self) -> None:
        """The instance ends: remove its pid file."""
        if self._pid_fd is None:
            return
        try:
            if self.pid_path is not None:
                os.unlink(self.pid_path)
        except OSError:
            pass            # removed by someone else: nothing of ours to remove
        os.close(self._pid_fd)
        self._pid_fd, self.pid_path = None, None
