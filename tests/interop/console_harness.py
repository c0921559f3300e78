"""Instances serving the admin console (console.listen) for the console oracle tests.

`ConsoleNode(binary, workdir, name)` runs `workdir/NAME.lua`, which listens on a unix
socket `workdir/NAME.control` (where `tarantoolctl enter NAME` looks with the
`.tarantoolctl` defaults file written next to it), on a TCP port and, with
`binary_port`, on a binary port with a user `tester` (password `secret`). The same
script runs on real Tarantool 2.6.0 and on Spindle. Unix socket paths are short
(/tmp/cxXXXX), as sun_path allows 107 bytes.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

from .oracle import SPINDLE, tarantool_binary

START_TIMEOUT = 30.0

SCRIPT = """\
local console = require('console')
local dir, tcp, bin = arg[1], tonumber(arg[2]), tonumber(arg[3])
if bin ~= nil then
    box.cfg{listen = '127.0.0.1:' .. bin, log_level = 1}
    box.schema.user.create('tester', {password = 'secret', if_not_exists = true})
    box.schema.user.grant('tester', 'super', nil, nil, {if_not_exists = true})
end
console.listen('unix/:' .. dir .. '/%(name)s.control')
console.listen('127.0.0.1:' .. tcp)
"""

DEFAULTS = """\
default_cfg = {{
    pid_file = "{dir}", wal_dir = "{dir}", memtx_dir = "{dir}",
    vinyl_dir = "{dir}", log = "{dir}", language = "lua",
}}
instance_dir = "{dir}"
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def short_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="cx", dir="/tmp"))


class ConsoleNode:
    def __init__(self, binary: str, name: str = "inst", binary_port: bool = False,
                 script: str = SCRIPT):
        self.binary = binary
        self.dir = short_dir()
        self.name = name
        self.tcp = free_port()
        self.bin = free_port() if binary_port else None
        self.sock = str(self.dir / f"{name}.control")
        (self.dir / f"{name}.lua").write_text(script % {"name": name})
        (self.dir / ".tarantoolctl").write_text(DEFAULTS.format(dir=self.dir))
        args = ["timeout", "-s", "KILL", "120", binary, f"{name}.lua", str(self.dir),
                str(self.tcp)]
        if self.bin is not None:
            args.append(str(self.bin))
        self.log = open(self.dir / "stderr.log", "wb")
        # a session of its own: stop() kills `timeout` and the server together (a
        # SIGKILL of `timeout` alone would leave the server running)
        self.proc = subprocess.Popen(args, cwd=self.dir, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    @property
    def kind(self) -> str:
        return "tarantool" if self.binary == tarantool_binary() else "spindle"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.binary} exited: {self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.tcp), timeout=1) as s:
                    if s.recv(128):
                        if self.bin is None or _greets(self.bin):
                            return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.binary} did not start: {self.output()}")

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        try:
            return (self.dir / "stderr.log").read_text(errors="replace")
        except OSError:
            return ""

    def env(self) -> dict[str, str]:
        """An environment whose tarantoolctl finds this node's `.tarantoolctl`."""
        # (HOME too: the console's readline history, ~/.tarantool_history, is
        # rewritten whole at every statement and must not grow run after run)
        env = dict(os.environ, PWD=str(self.dir), HOME=str(self.dir), TERM="dumb")
        env.pop("NOTIFY_SOCKET", None)
        return env

    def kill(self) -> None:
        """The server and its `timeout` guard, at once."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def stop(self) -> None:
        self.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ConsoleNode:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _greets(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            return len(s.recv(128)) > 0
    except OSError:
        return False


@contextlib.contextmanager
def both_running(**kwargs) -> Iterator[list[ConsoleNode]]:
    """both_nodes(), all stopped when the block ends, however it ends."""
    nodes = both_nodes(**kwargs)
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def both_nodes(**kwargs) -> list[ConsoleNode]:
    """Tarantool's node, then Spindle's (the first stopped if the second fails)."""
    real = ConsoleNode(tarantool_binary(), **kwargs)
    try:
        return [real, ConsoleNode(SPINDLE, **kwargs)]
    except BaseException:
        real.stop()
        raise


class RawClient:
    """A plain socket client of a console port: what arrives in reply to each line."""

    def __init__(self, target: str | int):
        if isinstance(target, str):
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.connect(target)
        else:
            self.sock = socket.create_connection(("127.0.0.1", target))
        self.sock.settimeout(10)
        self.greeting = self.read_exact(128)

    def read_exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_until(self, marker: bytes, timeout: float = 10) -> bytes:
        """Bytes up to and with `marker`; what came before EOF if the peer closes."""
        self.sock.settimeout(timeout)
        data = b""
        while marker not in data:
            try:
                chunk = self.sock.recv(65536)
            except (TimeoutError, socket.timeout):
                return data + b"<timeout>"
            except OSError:
                return data + b"<reset>"
            if not chunk:
                return data + b"<EOF>"
            data += chunk
        return data

    def ask(self, line: bytes, marker: bytes = b"\n...\n") -> bytes:
        self.send(line)
        return self.read_until(marker)

    def close(self) -> None:
        self.sock.close()


ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def clean_transcript(text: str, node: ConsoleNode) -> str:
    """A terminal transcript with the node's own names (socket path, port, pid)
    replaced, escape sequences and carriage returns removed."""
    text = ESCAPES.sub("", text).replace("\r", "")
    text = text.replace(node.sock, "SOCK").replace(str(node.dir), "DIR")
    text = text.replace(f"127.0.0.1:{node.tcp}", "HOST:PORT")
    if node.bin is not None:
        text = text.replace(f"127.0.0.1:{node.bin}", "HOST:BIN")
        text = text.replace(f"localhost:{node.bin}", "HOST:BIN")
    return text
