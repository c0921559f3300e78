"""An instance (spindle or tarantool) as a subprocess listening on a free loopback port.

The startup script gets the port as arg[1] and must `box.cfg{listen = ...}` as its
last step, so "the port accepts and greets" means "the script has finished".
Readiness is polled with a deadline; the process is always stopped by `stop()`
(terminate, then kill), which the tests call in `finally`.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

SPINDLE = str(Path(sys.executable).with_name("spindle"))
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BoxProcess:
    def __init__(self, binary: str, script: str, workdir: Path, name: str = "box.lua",
                 unix_path: str | None = None):
        """arg[1] of the script is a free TCP port, or `unix_path` when given."""
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(script)
        self.workdir = workdir
        self.unix_path = unix_path
        self.port = free_port() if unix_path is None else unix_path
        self.log = open(workdir / "stderr.log", "wb")
        self.proc = subprocess.Popen([binary, name, str(self.port)], cwd=workdir,
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> "BoxProcess":
        """Poll until the port greets us (128 bytes), the process dies, or time is up."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"instance exited with {self.proc.returncode}:\n"
                                   + self.output())
            try:
                with self._connect() as sock:
                    sock.settimeout(max(0.1, deadline - time.monotonic()))
                    greeting = b""
                    while len(greeting) < 128:
                        chunk = sock.recv(128 - len(greeting))
                        if not chunk:
                            break
                        greeting += chunk
                    if len(greeting) == 128 and greeting.startswith(b"Tarantool "):
                        return self
            except OSError as exc:
                last_error = exc
            time.sleep(0.02)
        raise RuntimeError(f"instance not ready in {timeout} s ({last_error}):\n"
                           + self.output())

    def _connect(self) -> socket.socket:
        if self.unix_path is None:
            return socket.create_connection(("127.0.0.1", self.port), timeout=1)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(1)
        try:
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        return sock

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return (self.workdir / "stderr.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()

    def __enter__(self) -> "BoxProcess":
        try:
            return self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
