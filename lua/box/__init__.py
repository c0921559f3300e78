"""The Lua face of the box: box.space, box.tuple, transactions, box.schema, box.info,
box.snapshot, over one `Box` (core/instance/box.py).

`BoxStorage` is made with the `box` module (before box.cfg): it creates the Box, hooks
the schema so box.space follows every DDL, and loads the Lua halves of the modules.
box.tuple is usable at once; the rest is put into the `box` table by the first
successful box.cfg, after `Box.start` (recovery or bootstrap, WAL, checkpoints) has
finished. A failing start leaves nothing behind: a fresh Box replaces the broken one
and box.cfg stays unconfigured.

Module map: tuple.py (tuple representation and box.tuple), space.py (box.space,
space and index objects, DML, triggers), txn.py, schema.py (box.schema over
core/box/ddl.py), sequence.py (box.sequence), info.py (box.info, box.snapshot).
box.session is
lua/session.py's (it knows IPROTO sessions too).
"""
from __future__ import annotations

import os
import traceback
from typing import Any, Callable

from spindle.core import log
from spindle.core.box.access import Access
from spindle.core.box.cfg_options import QUOTA_UNIT_SIZE
from spindle.core.instance.box import Box
from spindle.core.instance import startup
from spindle.core.instance.limbo_txn import on_synchro_option_changed
from spindle.core.box.ddl import Ddl
from spindle.core.replication.replicaset import replicaset_check_quorum
from spindle.core.replication.streams import describe_error

from spindle.core.box.schema import ADMIN
from spindle.core.iproto.errors import BoxError
from spindle.core.net.session import current_session

from .ctl import CtlApi
from .func import FuncApi
from .info import InfoApi
from .schema import SchemaApi
from .sequence import SequenceApi
from .space import SpaceApi
from .spark import SparkApi
from .stat import StatApi
from .process import ProcessOptions
from .tuple import TupleBridge
from .txn import TxnApi


# Dynamic options the box and replication read from Box.cfg when they need them.
_REMEMBERED = (
    "replication_timeout", "replication_connect_timeout", "replication_connect_quorum",
    "replication_sync_lag", "replication_sync_timeout", "replication_skip_conflict",
    "replication_synchro_quorum", "replication_synchro_timeout",
)


class BoxStorage:
    def __init__(self, module):
        self.module = module
        self.instance = module.instance
        self.runtime = runtime = module.runtime
        self.sched = runtime.sched
        self.started = False
        self._log_file = None
        self.process = ProcessOptions()
        # hooks every Box gets (a failed first box.cfg replaces the Box)
        self.recovery_progress_hooks: list = []
        self._new_box()
        box_table = module.lua_module
        self.tuples = TupleBridge(runtime)
        self.tuple_lua = self.tuples.lua
        box_table[b"tuple"] = self.tuples.box_tuple
        self.spaces = SpaceApi(self, box_table)
        self.txn = TxnApi(self, box_table, self.spaces.lua)
        self.sequence = SequenceApi(self, box_table)
        self.schema = SchemaApi(self, box_table, self.sequence.lua)
        self.info = InfoApi(self, box_table)
        self.ctl = CtlApi(self, box_table)
        self.spark = SparkApi(self, box_table)      # box.spark (Spark loads on first use)
        self.stat = StatApi(self, box_table)        # box.runtime now, box.stat with box.cfg
        self.funcs = FuncApi(self, box_table)       # box.func
        self._installers = [api.lua[b"install"] for api in
                            (self.spaces, self.txn, self.sequence, self.schema, self.info,
                             self.ctl, self.spark, self.funcs)]
        # what 2.6.0 has before box.cfg: box.index (iterator types), box.ctl
        self.spaces.lua[b"install_early"]()
        self.ctl.lua[b"install"]()

    def _new_box(self) -> None:
        self.box = Box(self.sched)
        self.box.on_recovery_progress.extend(self.recovery_progress_hooks)
        self.box.schema.on_space_change.append(lambda space_id: self.spaces.space_changed(space_id))
        self.box.schema.on_sequence_change.append(
            lambda seq_id: self.sequence.sequence_changed(seq_id))
        self.access = Access(self.box.schema)
        # access_check_sequence() of the running fiber's effective user
        self.box.schema.sequences.check_access = \
            lambda seq: self.access.check_sequence(self.euid(), seq.id)
        # functional indexes call persistent functions through the engine's hook
        self.box.engine.functions.call = lambda *args: self.funcs.index_call(*args)
        self.ddl = Ddl(self.box.engine, self.box.schema, self.euid,
                       session_user_id=self.uid, access=self.access,
                       check_writable=self.box.check_writable)

    def euid(self) -> int:
        """The effective user of the running fiber's session (admin without one)."""
        session = current_session(self.sched.current)
        return session.euid if session is not None else ADMIN

    def uid(self) -> int:
        session = current_session(self.sched.current)
        return session.uid if session is not None else ADMIN

    # ------------------------------------------------------------- box.cfg

    def appliers(self) -> dict[str, Callable[[Any], None]]:
        """Side effects of options (first box.cfg and later ones)."""
        appliers = {name: self._remember(name) for name in _REMEMBERED}
        return appliers | {
            "read_only": lambda value: self.box.set_read_only("config", bool(value)),
            "replication": self._set_replication,
            "replication_anon": self._set_replication_anon,
            "replication_connect_quorum": self._set_connect_quorum,
            "replication_synchro_quorum": self._set_synchro_option("replication_synchro_quorum"),
            "replication_synchro_timeout": self._set_synchro_option(
                "replication_synchro_timeout"),
            "checkpoint_interval": self._set_checkpoint_interval,
            "checkpoint_count": self._set_checkpoint_count,
            "log": self._set_log,
            "memtx_memory": self._set_memtx_memory,
            "memtx_max_tuple_size": lambda value: self.box.engine.arena.set_max_tuple_size(value),
            "replication_timeout": self._set_replication_timeout,
            "election_mode": self._set_election_mode,
            "election_timeout": self._set_election_timeout,
        }

    def _remember(self, name: str) -> Callable[[Any], None]:
        """Options the box reads when it needs them (replication timeouts...): keep
        Box.cfg current."""
        def apply(value: Any) -> None:
            self.box.cfg[name] = value
        return apply

    def _set_synchro_option(self, name: str) -> Callable[[Any], None]:
        """replication_synchro_quorum/_timeout: the limbo re-checks its entries
        (a lower quorum may confirm some now) and its waiters' deadlines."""
        def apply(value: Any) -> None:
            self.box.cfg[name] = value
            if self.started:
                on_synchro_option_changed(self.box)
                self.box.box_raft.update_quorum()   # (the election quorum follows it)
        return apply

    def _set_replication_timeout(self, value) -> None:
        self.box.cfg["replication_timeout"] = value
        self.box.box_raft.update_death_timeout()     # 4 x replication_timeout

    def _set_election_mode(self, value) -> None:
        """Applied at once on a later box.cfg; at the first one the box applies it
        when it is up (BoxRaft.start), as 2.6.3 enables election last."""
        self.box.cfg["election_mode"] = value
        self.box.box_raft.set_mode(value)

    def _set_election_timeout(self, value) -> None:
        self.box.cfg["election_timeout"] = value
        self.box.box_raft.set_election_timeout(value)

    def _set_replication(self, value) -> None:
        self.box.cfg["replication"] = value
        if self.started:
            startup.box_set_replication(self.box)

    def _set_replication_anon(self, value) -> None:
        if self.started:
            startup.box_set_replication_anon(self.box, bool(value))
        self.box.cfg["replication_anon"] = value

    def _set_connect_quorum(self, value) -> None:
        self.box.cfg["replication_connect_quorum"] = value
        if self.started:
            replicaset_check_quorum(self.box.replicaset)

    def start(self, values: dict) -> None:
        """The storage part of the first box.cfg: runs in the configuring fiber (a
        wait-request), returns when the box is up."""
        cwd = os.getcwd()
        self._set_memtx_memory(values["memtx_memory"])   # recovery obeys it too
        self.box.engine.arena.set_max_tuple_size(values["memtx_max_tuple_size"])
        try:
            # box.info, box.schema, box.begin... are there while the box loads, as in
            # 2.6.0 (load_cfg puts them back before box_cfg): on_schema_init triggers,
            # and what runs while recovery yields (an EVAL, another fiber), use them
            self.spaces.install()            # box.space follows the catalogue from now
            for install in self._installers:
                install()
            self._run_schema_init()
            self.box.start(values)
        except BaseException as exc:
            self._discard_box()
            os.chdir(cwd)
            if not isinstance(exc, Exception):
                raise           # cancelled, or the process exits anyway
            self._panic(_system_error(exc) if isinstance(exc, OSError) else exc)
        self.started = True
        config = self.module.config
        config.set_runtime_uuids(self.box.instance_uuid, self.box.schema.replicaset_uuid)
        # box.space again, from the whole catalogue: an object pushed while recovery
        # ran saw only the rows before it (a functional index before its _func row)
        self.spaces.install()
        self.sequence.install()          # (its objects are blessed by box.schema)
        self.stat.install()

    def _run_schema_init(self) -> None:
        """box.ctl.on_schema_init triggers, with box.space already there for them
        (the system spaces exist from the Box's creation)."""
        def install_spaces() -> None:
            self.spaces.install()
            self.spaces.lua[b"install"]()
        self.runtime.call(self.ctl.lua[b"run_schema_init"], self.runtime.bridge(install_spaces))

    def _panic(self, exc: Exception) -> None:
        """box_cfg() of 2.6.0: whatever stops the storage part of the first box.cfg
        (recovery, bootstrap, joining) is logged, then 'F> can't initialize
        storage: <message>', and the process exits with 1 — a pcall does not catch
        it. (Options are checked before this, and those errors are Lua errors.)"""
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        if not getattr(exc, "logged", False):
            if isinstance(exc, BoxError):
                log.error("%s", describe_error(exc))
            else:           # a bug, not the data's doing: keep the traceback
                log.error("%s", "".join(traceback.format_exception(exc)).rstrip())
        log.say(log.FATAL, "can't initialize storage: %s", message)
        self.instance.exit_now(1)

    def _discard_box(self) -> None:
        try:
            self.box.stop()
        except Exception as exc:   # noqa: BLE001 - the start error matters more
            log.error("stopping a half-started box: %s", exc)
        self._new_box()

    def stop(self) -> None:
        self.stat.stop()
        if self.started:
            self.box.stop()
        self.process.stop()
        if self._log_file is not None:
            log.close_file()
            self._log_file = None

    def _set_memtx_memory(self, value) -> None:
        """The tuple quota: memtx_memory rounded up to whole KiB, as 2.6.0's quota."""
        unit = QUOTA_UNIT_SIZE
        self.box.engine.arena.quota = (int(value) + unit - 1) // unit * unit

    def _set_checkpoint_interval(self, value) -> None:
        if self.box.checkpointer is not None:
            self.box.checkpointer.set_interval(float(value))

    def _set_checkpoint_count(self, value) -> None:
        if self.box.gc is not None:
            self.box.gc.set_checkpoint_count(int(value))

    def _set_log(self, value) -> None:
        """The static `log` option: a file (plain path or 'file:path') gets the log;
        pipes and syslog are not supported and leave the log on stderr."""
        if not value or not isinstance(value, str):
            return
        kind, _, target = value.partition(":")
        if not target:
            kind, target = "file", value
        if kind != "file":
            log.warn("log destination '%s' is not supported, logging to stderr", value)
            return
        work_dir = self.module.config.as_dict().get("work_dir")
        if work_dir:      # as in Tarantool, a relative log path is in work_dir
            target = os.path.join(work_dir, target)
        self._log_file = log.open_file(target)   # SIGHUP / log.rotate() reopen it


def _system_error(exc: OSError) -> BoxError:
    """A failed file operation of the box as Tarantool's SystemError."""
    where = f" '{exc.filename}'" if exc.filename else ""
    error = BoxError(f"{exc.strerror or exc}{where}")
    error.type = "SystemError"
    error.errno = exc.errno or 0          # box.error's errno, as 2.6.0 keeps it
    return error
