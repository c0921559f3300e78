"""Tarantool's `pwd` module (lua/modules/pwd.lua) over Python's pwd and grp.

A user is {name, id, workdir, shell, group = its primary group when it exists}; a
group is {name, id, members}; an unknown one is nil, as in 2.6.0.
"""
from __future__ import annotations

import grp
import os
import pwd

from ..runtime import read_source


# Plain lists cross to Lua, which builds the tables in 2.6.0's field order (the
# order pairs() and the serializers show them in).
def _group(entry: grp.struct_group) -> list:
    return [entry.gr_gid, entry.gr_name, list(entry.gr_mem)]


def _user(entry: pwd.struct_passwd) -> list:
    try:
        group = _group(grp.getgrgid(entry.pw_gid))
    except KeyError:
        group = None      # a user whose primary group is not in the database
    return [entry.pw_name, entry.pw_uid, entry.pw_dir, entry.pw_shell, group]


def getpw(key: int | str) -> list | None:
    try:
        entry = pwd.getpwnam(key) if isinstance(key, str) else pwd.getpwuid(int(key))
    except (KeyError, OverflowError, ValueError):
        return None
    return _user(entry)


def getgr(key: int | str) -> list | None:
    try:
        entry = grp.getgrnam(key) if isinstance(key, str) else grp.getgrgid(int(key))
    except (KeyError, OverflowError, ValueError):
        return None
    return _group(entry)


def build(instance):
    runtime = instance.runtime
    natives = {"getuid": os.getuid, "getgid": os.getgid, "getpw": getpw, "getgr": getgr,
               "getpwall": lambda: [_user(entry) for entry in pwd.getpwall()],
               "getgrall": lambda: [_group(entry) for entry in grp.getgrall()]}
    chunk = runtime.load(read_source("modules/pwd.lua"), "@builtin/pwd.lua")
    return chunk(runtime.table({k: runtime.bridge(v) for k, v in natives.items()}))
