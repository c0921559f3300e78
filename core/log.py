"""Tarantool's log: its levels, its line format, and a pluggable sink.

A line looks like Tarantool 2.6's:
    2026-11-22 02:20:39.679 [3539] main/103/t6.lua t6.lua:5 W> text
i.e. time, [pid], cord/fiber-id/fiber-name, an optional "file:line" (Tarantool adds it
for warnings and worse), the level letter and the message.

The current fiber is found through a provider set by the fiber scheduler, and lines go
to a sink function so the console can print them above the line being edited.
box.cfg{log = 'file'} makes the sink a `LogFile`, which SIGHUP and log.rotate() reopen
by name (`rotate`), as logrotate expects.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Callable

# Tarantool's numeric levels (box.cfg.log_level) and the letter each prints.
FATAL, SYSERROR, ERROR, CRIT, WARN, INFO, VERBOSE, DEBUG = 0, 1, 2, 3, 4, 5, 6, 7
LETTERS = {FATAL: "F", SYSERROR: "!", ERROR: "E", CRIT: "C", WARN: "W", INFO: "I",
           VERBOSE: "V", DEBUG: "D"}
LEVEL_NAMES = {"fatal": FATAL, "syserror": SYSERROR, "error": ERROR, "crit": CRIT,
               "warn": WARN, "info": INFO, "verbose": VERBOSE, "debug": DEBUG}

level = INFO
log_format = "plain"            # or "json" (box.cfg.log_format, log.log_format())
# Until the first box.cfg sets the logger up, 2.6.0 writes through its boot logger
# (say_format_boot): the message alone, no time, pid, fiber or level letter.
booting = True
LOG_FORMATS = ("plain", "json")
_pid = os.getpid()
# functions called with no arguments after the level or the format changed (the Lua
# log module keeps log.cfg up to date through one)
_listeners: list[Callable[[], None]] = []


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)     # box.cfg{background = true}
_lock = threading.Lock()   # the WAL and REPL threads log too


def _stderr_sink(line: str) -> None:
    try:
        stream = sys.stderr
        buffer = getattr(stream, "buffer", None)
        if buffer is None or line.isascii():
            stream.write(line + "\n")
            stream.flush()
        else:
            # a Lua string that is not UTF-8 (surrogate escapes) goes out as its
            # bytes, as Tarantool writes it
            stream.flush()
            buffer.write((line + "\n").encode("utf-8", "surrogateescape"))
            buffer.flush()
    except (OSError, ValueError):
        pass   # a closed stderr must never take the instance down


_sink: Callable[[str], None] = _stderr_sink


def _no_fiber() -> tuple[int, str]:
    return 1, "main"


# Returns (fiber id, fiber name) of the fiber running now; the scheduler installs it.
_fiber_provider: Callable[[], tuple[int, str]] = _no_fiber


def set_sink(sink: Callable[[str], None] | None) -> Callable[[str], None]:
    """Route log lines to `sink` (None restores stderr); returns the previous sink."""
    global _sink
    previous, _sink = _sink, sink or _stderr_sink
    return previous


def set_fiber_provider(provider: Callable[[], tuple[int, str]] | None) -> None:
    global _fiber_provider
    _fiber_provider = provider or _no_fiber


def set_level(new_level: int | str) -> None:
    global level, booting
    level = LEVEL_NAMES[new_level] if isinstance(new_level, str) else int(new_level)
    booting = False            # (log.cfg and box.cfg set the logger up: see init_std)
    _changed()


def init_std() -> None:
    """The logger set up (say_logger_init: the first box.cfg, log.cfg or
    log.log_format): lines get their prefix."""
    global booting
    booting = False


def set_format(name: str) -> None:
    """'plain' (Tarantool's default lines) or 'json' (one JSON object a line)."""
    global log_format
    if name not in LOG_FORMATS:
        raise ValueError(f"unknown log format {name!r}")
    log_format = name
    init_std()
    _changed()


def add_listener(listener: Callable[[], None]) -> None:
    _listeners.append(listener)


def _changed() -> None:
    for listener in _listeners:
        listener()


_LEVEL_WORDS = {FATAL: "FATAL", SYSERROR: "SYSERROR", ERROR: "ERROR", CRIT: "CRIT",
                WARN: "WARN", INFO: "INFO", VERBOSE: "VERBOSE", DEBUG: "DEBUG"}


def _json_text(text: str) -> str:
    # escaped as 2.6.0's JSON lines escape it ('/' too)
    return json.dumps(text, ensure_ascii=False).replace("/", "\\/")


def _json_line(lvl: int, message: str, where: str | None, now: float,
               fields: str | None) -> str:
    """2.6.0's say_format_json(): time, level, the message (or a table message's own
    fields), pid, cord and fiber, and the caller's file and line when known."""
    local = time.localtime(now)
    stamp = (time.strftime("%Y-%m-%dT%H:%M:%S", local) + f".{int((now % 1) * 1000):03d}"
             + time.strftime("%z", local))
    parts = [f'{{"time": "{stamp}", "level": "{_LEVEL_WORDS.get(lvl, "INFO")}", ']
    parts.append(fields if fields is not None else f'"message": {_json_text(message)}')
    parts.append(f', "pid": {_pid} ')
    if threading.current_thread() is threading.main_thread():
        fid, fname = _fiber_provider()
        parts.append(f', "cord_name": "main", "fiber_id": {fid}, '
                     f'"fiber_name": {_json_text(fname)}')
    else:
        parts.append(f', "cord_name": {_json_text(threading.current_thread().name)}')
    if where:
        file, _, line = where.rpartition(":")
        if file and line.isdigit():
            parts.append(f', "file": {_json_text(file)}, "line": {line}')
    parts.append("}")
    return "".join(parts)


def format_line(lvl: int, message: str, where: str | None = None,
                now: float | None = None, fields: str | None = None) -> str:
    """One log line; `fields` is a table message as JSON object members (the json
    format writes them in place of "message")."""
    if booting:
        return message
    now = time.time() if now is None else now
    if log_format == "json":
        return _json_line(lvl, message, where, now, fields)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    millis = int((now % 1) * 1000)
    if threading.current_thread() is threading.main_thread():
        fid, fname = _fiber_provider()
        # Tarantool names only the cord for its scheduler fiber (id 1): "main C> ..."
        origin = f"main/{fid}/{fname}" if fid != 1 else "main"
    else:
        origin = threading.current_thread().name
    location = f" {where}" if where else ""
    return f"{stamp}.{millis:03d} [{_pid}] {origin}{location} {LETTERS.get(lvl, 'I')}> {message}"


def say(lvl: int, message: str, *args, where: str | None = None,
        fields: str | None = None) -> None:
    if lvl > level:
        return
    if args:
        message = message % args
    line = format_line(lvl, message, where, fields=fields)
    with _lock:
        _sink(line)


def info(message: str, *args) -> None:
    say(INFO, message, *args)


def crit(message: str, *args) -> None:
    say(CRIT, message, *args)


def warn(message: str, *args, where: str | None = None) -> None:
    say(WARN, message, *args, where=where)


def error(message: str, *args, where: str | None = None) -> None:
    say(ERROR, message, *args, where=where)


def verbose(message: str, *args) -> None:
    say(VERBOSE, message, *args)


def debug(message: str, *args) -> None:
    say(DEBUG, message, *args)


class LogFile:
    """The sink of box.cfg{log = 'path'}: lines appended to a file that `reopen` opens
    again by its name, so that after logrotate renamed the file away the log goes on
    in a fresh one. The path is made absolute at once: box.cfg may change the working
    directory (work_dir) after the log is opened."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.file = self._open()

    def _open(self):
        # O_APPEND | O_CREAT with Tarantool's mode (rw-r-----, less the umask)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        return open(fd, "a", buffering=1, encoding="utf-8", errors="surrogateescape")

    def __call__(self, line: str) -> None:
        try:
            self.file.write(line + "\n")
        except (OSError, ValueError):
            pass   # a full disk must never take the instance down

    def reopen(self) -> None:
        """Raises OSError when the file can't be opened; the old one is kept then."""
        fresh = self._open()
        with _lock:           # writers hold it: none is between the swap and the close
            old, self.file = self.file, fresh
        old.close()

    def close(self) -> None:
        with _lock:
            self.file.close()


_log_file: LogFile | None = None


def open_file(path: str) -> LogFile:
    """Send the log to the file `path` from now on (box.cfg's static `log` option)."""
    global _log_file
    log_file = LogFile(path)
    close_file()
    _log_file = log_file
    set_sink(log_file)
    return log_file


def close_file() -> None:
    """Stop logging to the file, if any: lines go to stderr again."""
    global _log_file
    log_file, _log_file = _log_file, None
    if log_file is not None:
        if _sink is log_file:
            set_sink(None)
        log_file.close()


def rotate() -> threading.Thread | None:
    """SIGHUP and log.rotate(): reopen the log file by its name. As in Tarantool the
    open happens in a helper thread named "coio" (a slow file system must not stall
    the tx thread) and its line goes to the new file; the caller does not wait.
    Returns that thread, or None when the log is not a file (nothing to reopen)."""
    log_file = _log_file
    if log_file is None:
        return None
    thread = threading.Thread(target=_reopen, args=(log_file,), name="coio", daemon=True)
    thread.start()
    return thread


def _reopen(log_file: LogFile) -> None:
    try:
        log_file.reopen()
    except OSError as exc:
        say(SYSERROR, "SystemError logrotate can't open %s: %s", log_file.path,
            exc.strerror or exc)
        return
    info("log file has been reopened")
