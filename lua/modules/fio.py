"""Tarantool's `fio` module (lua/modules/fio.lua): the Lua side checks arguments and
builds paths, handles and stat objects; this side does the file system calls.

Every call that touches the disk runs in a helper thread (coio.run_in_thread), as
2.6.0 sends them to its coio pool: a fiber reading a big file or waiting on a slow
disk parks only itself. A failure comes back to Lua as (nil, error): a SystemError
"fio: <strerror>" with its errno, which is also box.error.last(), as in 2.6.0.
"""
from __future__ import annotations

import errno
import glob
import os
import stat
import sys

from spindle.core.fiber.coio import run_in_thread
from spindle.core.iproto.errors import BoxError

from ..runtime import Multi, read_source
from .errno import set_errno

# O_LARGEFILE is 0 in a 64-bit glibc's headers (off_t is already 64 bits); Python
# reports the kernel's bit, which 2.6.0 does not show.
_FLAGS = ("O_RDONLY", "O_WRONLY", "O_RDWR", "O_APPEND", "O_ASYNC", "O_CLOEXEC", "O_CREAT",
          "O_DIRECT", "O_DIRECTORY", "O_EXCL", "O_LARGEFILE", "O_NDELAY", "O_NOATIME",
          "O_NOCTTY", "O_NOFOLLOW", "O_NONBLOCK", "O_PATH", "O_SYNC", "O_TMPFILE", "O_TRUNC")
_MODES = ("S_IRWXU", "S_IRUSR", "S_IWUSR", "S_IXUSR", "S_IRWXG", "S_IRGRP", "S_IWGRP",
          "S_IXGRP", "S_IRWXO", "S_IROTH", "S_IWOTH", "S_IXOTH")
_SEEKS = ("SEEK_SET", "SEEK_CUR", "SEEK_END", "SEEK_DATA", "SEEK_HOLE")


def constants() -> dict[str, dict[str, int]]:
    """fio.c: the platform's open flags, permission bits and lseek whences."""
    flags = {name: getattr(os, name) for name in _FLAGS if hasattr(os, name)}
    if "O_LARGEFILE" in flags and sys.maxsize > 2 ** 32:
        flags["O_LARGEFILE"] = 0
    return {"flag": flags,
            "mode": {name: getattr(stat, name) for name in _MODES},
            "seek": {name: getattr(os, name) for name in _SEEKS if hasattr(os, name)}}


def _seconds(ns: int) -> float:
    # as 2.6.0's stat: whole seconds plus nanoseconds / 1e9
    return ns // 1_000_000_000 + (ns % 1_000_000_000) / 1e9


def _stat_fields(st: os.stat_result) -> dict:
    return {"inode": st.st_ino, "rdev": st.st_rdev, "size": st.st_size,
            "atime": _seconds(st.st_atime_ns), "mode": st.st_mode,
            "mtime": _seconds(st.st_mtime_ns), "nlink": st.st_nlink, "uid": st.st_uid,
            "blksize": st.st_blksize, "gid": st.st_gid,
            "ctime": _seconds(st.st_ctime_ns), "dev": st.st_dev, "blocks": st.st_blocks}


# (shutil and tempfile are imported on first use: a few ms off every start)
def _copyfile(source: bytes, target: bytes) -> bool:
    import shutil
    shutil.copyfile(source, target)
    os.chmod(target, stat.S_IMODE(os.stat(source).st_mode))
    return True


_TEMP_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _tempdir() -> bytes:
    """mkdtemp("$TMPDIR/XXXXXX") as 2.6.0 calls it: six random letters, mode 0700."""
    import secrets
    base = os.environ.get("TMPDIR") or "/tmp"
    for _ in range(100):
        path = os.path.join(base, "".join(secrets.choice(_TEMP_LETTERS) for _ in range(6)))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.fsencode(path)
    raise FileExistsError(17, "File exists")


_glob_call = None
_GLOB_NOESCAPE = 1 << 6      # glibc's; 2.6.0 takes a backslash literally


def _libc_glob():
    """The C library's glob(3), through ctypes (loaded on first use): 2.6.0 calls it,
    and Python's glob module differs ('.*' matches '.' and '..' there, '[^a]' negates)."""
    global _glob_call
    if _glob_call is None:
        import ctypes
        import ctypes.util

        class GlobT(ctypes.Structure):
            # glibc's glob_t: the count, the paths, the offset, the flags and five
            # callbacks (GLOB_ALTDIRFUNC), unused here
            _fields_ = [("gl_pathc", ctypes.c_size_t),
                        ("gl_pathv", ctypes.POINTER(ctypes.c_char_p)),
                        ("gl_offs", ctypes.c_size_t), ("gl_flags", ctypes.c_int),
                        ("callbacks", ctypes.c_void_p * 5)]

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.glob.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                              ctypes.POINTER(GlobT)]
        libc.globfree.argtypes = [ctypes.POINTER(GlobT)]

        def call(pattern: bytes) -> list[bytes]:
            found = GlobT()
            code = libc.glob(pattern, _GLOB_NOESCAPE, None, ctypes.byref(found))
            try:
                if code != 0:
                    return []        # no match (or an unreadable directory): none
                return [found.gl_pathv[i] for i in range(found.gl_pathc)]
            finally:
                libc.globfree(ctypes.byref(found))
        _glob_call = call
    return _glob_call


def _glob(pattern: bytes) -> list[bytes]:
    """glob(3) with 2.6.0's flag (GLOB_NOESCAPE): sorted, no hidden files for
    wildcards."""
    try:
        return _libc_glob()(pattern)
    except (OSError, AttributeError):
        return sorted(glob.glob(pattern))      # a C library without glob(3)


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return len(data)


def _pwrite_all(fd: int, data: bytes, offset: int) -> int:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done
    return len(data)


def _done(result):
    return True if result is None else result


# name -> (function run in the thread, how a success comes back to Lua)
_CALLS = {
    "open": (os.open, None),
    "close": (os.close, _done),
    "read": (os.read, None),
    "write": (_write_all, None),
    "pread": (os.pread, None),
    "pwrite": (_pwrite_all, None),
    "ftruncate": (os.ftruncate, _done),
    "fsync": (os.fsync, _done),
    "fdatasync": (os.fdatasync, _done),
    "fstat": (os.fstat, _stat_fields),
    "stat": (os.stat, _stat_fields),
    "lstat": (os.lstat, _stat_fields),
    "mkdir": (os.mkdir, _done),
    "rmdir": (os.rmdir, _done),
    "unlink": (os.unlink, _done),
    "link": (os.link, _done),
    "symlink": (os.symlink, _done),
    "readlink": (os.readlink, None),
    "rename": (os.rename, _done),
    "chown": (os.chown, _done),
    "chmod": (os.chmod, _done),
    "truncate": (os.truncate, _done),
    "sync": (os.sync, _done),
    "utime": (lambda path, atime, mtime: os.utime(path, (atime, mtime)), _done),
    "listdir": (os.listdir, None),
    "glob": (_glob, None),
    "tempdir": (_tempdir, None),
    "copyfile": (_copyfile, None),
}


# the calls whose bytes arguments are all paths: a C string ends at its first NUL
_PATH_CALLS = frozenset({"open", "stat", "lstat", "mkdir", "rmdir", "unlink", "link",
                         "symlink", "readlink", "rename", "chown", "chmod", "truncate",
                         "utime", "listdir", "glob", "copyfile"})


class FioModule:
    def __init__(self, instance):
        runtime = instance.runtime
        self.instance = instance
        self.runtime = runtime
        self.sched = runtime.sched
        blocking = {name: self._call(fn, shape, name in _PATH_CALLS)
                    for name, (fn, shape) in _CALLS.items()}
        blocking["lseek"] = self._lseek
        # the same calls made in place, for Lua that cannot yield (a module's body
        # run by require(), a metamethod): the tx thread waits on the disk instead
        inline = {name: self._call(fn, shape, name in _PATH_CALLS, inline=True)
                  for name, (fn, shape) in _CALLS.items()}
        inline["lseek"] = lambda fd, offset, whence: self._lseek(fd, offset, whence, True)
        natives = {
            "cwd": os.getcwd,
            "time": lambda: self.sched.wall_time,
            "chdir": self._chdir,
            "umask": self._umask,
            "getpwnam": self._uid_of,
            "getgrnam": self._gid_of,
        }
        bridge = runtime.bridge
        chunk = runtime.load(read_source("modules/fio.lua"), "@builtin/fio.lua")
        self.lua_module = chunk(runtime.table({k: bridge(v) for k, v in natives.items()}),
                                runtime.table(blocking), runtime.wait,
                                runtime.to_lua(constants()), runtime.table(inline))

    def _call(self, fn, shape, paths: bool, inline: bool = False):
        runtime, sched, instance = self.runtime, self.sched, self.instance
        to_lua = runtime.to_lua

        def failed(code: int):
            set_errno(instance, code)       # errno() after a failed call, as in 2.6.0
            return Multi((None, runtime.error_to_lua(system_error(OSError(code, "")))))

        def call(*args):
            # Lua numbers arrive as floats; the os calls want whole ones as ints
            args = [int(a) if type(a) is float and a.is_integer() else a for a in args]
            if paths:
                args = [a.split(b"\0", 1)[0] if type(a) is bytes else a for a in args]
            try:
                result = fn(*args) if inline else run_in_thread(sched, fn, *args)
            except OSError as exc:
                return failed(exc.errno or errno.EIO)
            except ValueError:
                # Python refuses a negative descriptor (a closed handle's -1)
                # before the system call would have said EBADF
                return failed(errno.EBADF)
            except (TypeError, OverflowError):
                return failed(errno.EINVAL)     # a value the system call would refuse
            if shape is not None:
                result = shape(result)
            return result if type(result) in (bytes, int, bool) else to_lua(result)

        return call

    def _lseek(self, fd, offset, whence, inline: bool = False):
        # 2.6.0's seek answers -1 on failure and says nothing more
        args = (int(fd), int(offset), int(whence))
        try:
            if inline:
                return os.lseek(*args)
            return run_in_thread(self.sched, os.lseek, *args)
        except (OSError, OverflowError, ValueError):
            return -1

    @staticmethod
    def _chdir(path: str) -> bool:
        try:
            os.chdir(path)
        except OSError:
            return False
        return True

    @staticmethod
    def _umask(mask: int | None) -> int:
        if mask is None:
            old = os.umask(0)
            os.umask(old)
            return old
        return os.umask(int(mask))

    @staticmethod
    def _uid_of(name: str):
        import pwd
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            return None

    @staticmethod
    def _gid_of(name: str):
        import grp
        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            return None


def system_error(exc: OSError) -> BoxError:
    """2.6.0's fio error: a SystemError 'fio: <strerror>' carrying the errno."""
    code = exc.errno or 0
    error = BoxError(f"fio: {os.strerror(code)}")
    error.type = "SystemError"
    error.errno = code
    return error.located("./src/lua/fio.c", 361)


def build(instance):
    return FioModule(instance).lua_module
