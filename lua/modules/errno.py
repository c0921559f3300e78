"""Tarantool's `errno` module (lua/modules/errno.lua). Python code that fails a call
the way a C function of 2.6.0 would (fio, socket) reports its errno with set_errno()."""
from __future__ import annotations

import errno as py_errno
import weakref

from ..runtime import read_source

# the names 2.6.0's errno module has (its list, not every name of the platform);
# the numbers are the platform's
NAMES = (
    "E2BIG EACCES EADDRINUSE EADDRNOTAVAIL EAFNOSUPPORT EAGAIN EALREADY EBADF EBADMSG "
    "EBUSY ECANCELED ECHILD ECONNABORTED ECONNREFUSED ECONNRESET EDEADLK EDESTADDRREQ "
    "EDOM EDQUOT EEXIST EFAULT EFBIG EHOSTUNREACH EIDRM EILSEQ EINPROGRESS EINTR EINVAL "
    "EIO EISCONN EISDIR ELOOP EMFILE EMLINK EMSGSIZE EMULTIHOP ENAMETOOLONG ENETDOWN "
    "ENETRESET ENETUNREACH ENFILE ENOBUFS ENODATA ENODEV ENOENT ENOEXEC ENOLCK ENOLINK "
    "ENOMEM ENOMSG ENOPROTOOPT ENOSPC ENOSR ENOSTR ENOSYS ENOTCONN ENOTDIR ENOTEMPTY "
    "ENOTSOCK ENOTSUP ENOTTY ENXIO EOPNOTSUPP EOVERFLOW EPERM EPIPE EPROTO EPROTONOSUPPORT "
    "EPROTOTYPE ERANGE EROFS ESPIPE ESRCH ESTALE ETIME ETIMEDOUT ETXTBSY EWOULDBLOCK EXDEV"
).split()

# instance -> the Lua setter of its errno()
_SETTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def build(instance):
    runtime = instance.runtime
    constants = runtime.table({name: getattr(py_errno, name) for name in NAMES
                               if hasattr(py_errno, name)})
    chunk = runtime.load(read_source("modules/errno.lua"), "@errno.lua")
    module, setter = chunk(constants)
    _SETTERS[instance] = setter
    return module


def set_errno(instance, value: int) -> None:
    """What errno() returns next in `instance`'s Lua, as after a failed C call."""
    _SETTERS[instance](int(value))
