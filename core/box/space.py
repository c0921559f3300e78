"""A memtx space: tuples, indexes, format checks, DML and its triggers.

DML follows memtx_space.c / space.c of 2.6.0:

* INSERT and REPLACE validate the tuple against the format (field_count, field types of the
  format and of every index part, nullability, required fields), then replace it in the
  primary key (INSERT refuses a duplicate) and in every secondary key (where any duplicate
  in a unique index is ER_TUPLE_FOUND naming that index); a failure leaves no trace.
* DELETE and UPDATE find the tuple through a unique index by an exact key; a miss returns
  None (and still logs the request, as 2.6.0 does). UPDATE may not change the primary key.
  Through a secondary index, the logged request is rebound to the primary key.
* UPSERT validates its tuple, then inserts it (still checking the operations) or applies
  the operations to the existing tuple, skipping the failing ones (reported to
  `Space.log_upsert_error`); if they change the primary key, nothing happens.
* before_replace triggers get (old, new, space_name, op) and may return: None to keep the
  new tuple, NULL_TUPLE to drop it (the request becomes DELETE, or NOP), or a tuple to put
  in its place (the request becomes REPLACE). on_replace triggers get the same arguments
  after the change, with the (possibly rewritten) request's name.

Tuples are Python tuples; lists given as tuples are converted.
"""
from __future__ import annotations

from spindle.core import log
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from spindle.core.box.field_types import (
    INDEXABLE, UINT64_MAX, FieldType, field_type_by_name, format_check, is_compatible,
    type1_contains_type2,
)
from spindle.core.iproto.msgpack import pack_tuple, tuple_bsize
from spindle.core.box.index import DupMode, Index, IndexDef, IndexType, make_index
from spindle.core.box.json_path import PathChecks, container_type
from spindle.core.box.key_def import normalize_key
from spindle.core.box.memtx_arena import MemtxArena
if TYPE_CHECKING:
    from spindle.core.box.index_func import Functions
from spindle.core.box.stat import REQUESTS
from spindle.core.box.sequence import (
    Sequence as SpaceSequence, handle_sequence, sequence_tuple,
)
from spindle.core.box.txn import PutRequest, Statement, Txn, TxnManager, put_row
from spindle.core.box.update import check_ops, update_tuple, upsert_tuple
from spindle.core.fiber.trigger import TriggerList
from spindle.core.iproto.constants import GroupId, IprotoType
from spindle.core.iproto.errors import ClientError, ErrorCode
from spindle.core.iproto.request import DmlRequest

_INSERT, _REPLACE = int(IprotoType.INSERT), int(IprotoType.REPLACE)
_DELETE, _UPDATE, _UPSERT = (int(IprotoType.DELETE), int(IprotoType.UPDATE),
                             int(IprotoType.UPSERT))
# The duplicate modes of INSERT and REPLACE (an Enum member lookup costs as much as a
# call: the hot path takes them from here)
_STORE_MODE = {_INSERT: DupMode.INSERT, _REPLACE: DupMode.REPLACE_OR_INSERT}


class _NullTuple:
    """Returned by a before_replace trigger to drop the new tuple (Lua's `return nil`)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL_TUPLE"


NULL_TUPLE = _NullTuple()


class FieldDef:
    __slots__ = ("name", "type", "is_nullable", "collation")

    def __init__(self, name: str, type: str | FieldType = FieldType.ANY,
                 is_nullable: bool = False, collation: str | None = None):
        self.name = name
        self.type = field_type_by_name(type)
        self.is_nullable = bool(is_nullable)
        self.collation = collation

    @classmethod
    def of(cls, spec: Any) -> "FieldDef":
        if isinstance(spec, FieldDef):
            return spec
        if isinstance(spec, dict):
            return cls(spec["name"], spec.get("type", FieldType.ANY),
                       spec.get("is_nullable", False), spec.get("collation"))
        return cls(*spec)

    def to_dict(self) -> dict:
        out: dict = {"name": self.name, "type": self.type.value}
        if self.is_nullable:
            out["is_nullable"] = True
        if self.collation is not None:
            out["collation"] = self.collation
        return out


class Space:
    def __init__(self, id: int, name: str, engine: str = "memtx", field_count: int = 0,
                 format: Sequence[Any] | None = None, flags: dict | None = None,
                 indexes: Sequence[IndexDef] | None = None, *,
                 txns: TxnManager | None = None):
        self.id = id
        self.name = name
        self.engine = engine
        self.field_count = field_count
        self.flags = dict(flags or {})
        self.txns = txns if txns is not None else TxnManager()
        self.before_replace = TriggerList()
        self.on_replace = TriggerList()
        self.indexes: dict[int, Index] = {}
        # the attached sequence (`_space_sequence`) and its field (0-based, JSON path)
        self.sequence: SpaceSequence | None = None
        self.sequence_fieldno = 0
        self.sequence_path: str | None = None
        self._bsize = 0
        # the engine's tuple memory (Engine.create_space gives the shared one), and
        # the bsize this space may reach before it asks the arena for more
        self.arena = MemtxArena()
        self._bsize_granted = 0
        # the engine's persistent functions, for functional indexes (Engine.create_space)
        self.functions: Functions | None = None
        self._format: list[FieldDef] = [FieldDef.of(f) for f in (format or [])]
        self._rebuild_format()
        for index_def in indexes or ():
            self.create_index(index_def)

    def __repr__(self) -> str:
        return f"<Space {self.id} {self.name!r}>"

    # -- options --------------------------------------------------------------

    @property
    def flags(self) -> dict:
        return self._flags

    @flags.setter
    def flags(self, flags: dict) -> None:
        # The options every statement asks for are kept as plain attributes; flags
        # change only by assignment (an `_space` alter).
        self._flags = flags
        self.is_temporary = bool(flags.get("temporary"))
        self.is_local = flags.get("group_id") == GroupId.LOCAL or bool(flags.get("is_local"))
        self.is_sync = bool(flags.get("is_sync"))
        self.group_id = GroupId.LOCAL if self.is_local else GroupId.DEFAULT

    @property
    def field_count(self) -> int:
        return self._field_count

    @field_count.setter
    def field_count(self, field_count: int) -> None:
        self._field_count = field_count
        if hasattr(self, "_checks"):      # the compiled format check counts fields too
            self._set_checks(self._checks, self._required, self._paths)

    @property
    def format(self) -> list[dict]:
        return [f.to_dict() for f in self._format]

    @property
    def field_names(self) -> dict[str, int]:
        return self._field_names

    def set_format(self, format: Sequence[Any], field_count: int | None = None) -> None:
        """Alter the format; every stored tuple must satisfy the new one."""
        old = (self._format, self.field_count)
        self._format = [FieldDef.of(f) for f in format]
        if field_count is not None:
            self.field_count = field_count
        try:
            self._rebuild_format()
            for tup in self._all_tuples():
                self.validate_tuple(tup)
        except ClientError:
            self._format, self.field_count = old
            self._rebuild_format()
            raise

    # -- format ---------------------------------------------------------------

    def _rebuild_format(self, extra: IndexDef | None = None) -> None:
        """tuple_format_create(): merge format fields with index parts."""
        types: dict[int, FieldType] = {}
        nullable: dict[int, bool] = {}
        key_parts: set[int] = set()
        paths = PathChecks()
        for no, f in enumerate(self._format):
            types[no] = f.type
            nullable[no] = f.is_nullable
        defs = [idx.index_def for idx in self.indexes.values()]
        if extra is not None:
            defs.append(extra)
        for index_def in defs:
            if index_def.opts.get("func") is not None:
                continue    # (a functional index's parts are its function's results)
            for part in index_def.key_def.parts:
                no = part.fieldno
                ptype, pnullable = part.type, part.is_nullable
                if part.tokens:    # a JSON path: the field is its container (json_path.py)
                    paths.add(no, part.tokens, ptype, pnullable)
                    ptype, pnullable = container_type(part.tokens[0]), True
                if no not in nullable:
                    nullable[no] = pnullable
                else:
                    nullable[no] = nullable[no] and pnullable
                current = types.get(no, FieldType.ANY)
                if type1_contains_type2(current, ptype):
                    types[no] = ptype
                elif not type1_contains_type2(ptype, current):
                    # (a path's container conflicts as with another index, in 2.6.0)
                    code = (ErrorCode.ER_INDEX_PART_TYPE_MISMATCH
                            if no in key_parts or part.tokens
                            else ErrorCode.ER_FORMAT_MISMATCH_INDEX_PART)
                    raise ClientError(code, str(no + 1), current.value, ptype.value)
                key_parts.add(no)
        width = max(list(types) + list(nullable), default=-1) + 1
        checks = []
        declared = len(self._format)
        for no in range(width):
            ftype = types.get(no, FieldType.ANY)
            is_nullable = nullable.get(no, True)
            # a field the format names is checked even as `any` (which refuses some
            # extension types); one it does not name takes everything
            checks.append(None if ftype is FieldType.ANY and no >= declared
                          else (ftype, is_nullable))
        while checks and checks[-1] is None:
            checks.pop()
        self._set_checks(checks, sorted(no for no, n in nullable.items() if not n), paths)
        self._field_names = {f.name: no for no, f in enumerate(self._format)}

    def _set_checks(self, checks: list, required: list[int],
                    paths: PathChecks | None = None) -> None:
        """The format's field checks (None: any; else (type, nullable), by field
        number), required fields and nested fields of JSON paths, and their compiled
        form (`_fits`)."""
        self._checks, self._required, self._paths = checks, required, paths or None
        fits = format_check(checks, required[-1] + 1 if required else 0, self.field_count)
        if paths:
            def fits_paths(tup, fits=fits, nested=paths.fits):
                return fits(tup) and nested(tup)
            self._fits: Callable[[tuple], bool] = fits_paths
        else:
            self._fits = fits
        # (_put tests this format inline)
        self._uint_key_len = getattr(self._fits, "uint_key_len", 0)

    def validate_tuple(self, tup: Any) -> tuple:
        """Format check of a tuple to store; returns it as a Python tuple."""
        if type(tup) is list:       # as decoded from MsgPack: checked in its stored form
            tup = tuple(tup)
        if type(tup) is tuple and self._fits(tup):
            return tup
        # the full check: finds which error to raise (or takes a list subclass)
        if not isinstance(tup, (list, tuple)):
            raise ClientError(ErrorCode.ER_TUPLE_NOT_ARRAY)
        n = len(tup)
        if self.field_count and n != self.field_count:
            raise ClientError(ErrorCode.ER_EXACT_FIELD_COUNT, n, self.field_count)
        for check, value in zip(self._checks, tup):
            if check is not None and not is_compatible(check[0], value, check[1]):
                self._raise_field_type(tup)
        if self._required and self._required[-1] >= n:
            for no in self._required:
                if no >= n:
                    raise ClientError(ErrorCode.ER_FIELD_MISSING, str(no + 1))
        if self._paths is not None:
            self._paths.check(tup)
        return tup if type(tup) is tuple else tuple(tup)

    def _raise_field_type(self, tup: Any) -> None:
        """ER_FIELD_TYPE of the first field of `tup` its type check refuses."""
        for no, (check, value) in enumerate(zip(self._checks, tup)):
            if check is not None and not is_compatible(check[0], value, check[1]):
                raise ClientError(ErrorCode.ER_FIELD_TYPE, str(no + 1), check[0].value)

    # -- indexes --------------------------------------------------------------

    @property
    def primary(self) -> Index | None:
        return self.indexes.get(0)

    def index(self, id_or_name: int | str) -> Index:
        if isinstance(id_or_name, str):
            for idx in self.indexes.values():
                if idx.name == id_or_name:
                    return idx
            raise ClientError(ErrorCode.ER_NO_SUCH_INDEX_NAME, id_or_name, self.name)
        found = self.indexes.get(id_or_name)
        if found is None:
            raise ClientError(ErrorCode.ER_NO_SUCH_INDEX_ID, id_or_name, self.name)
        return found

    def _unique_index(self, index_id: int) -> Index:
        idx = self.index(index_id)
        if not idx.unique:
            raise ClientError(ErrorCode.ER_MORE_THAN_ONE_TUPLE)
        return idx

    def alter_index(self, index_def: IndexDef) -> dict[int, Index]:
        """Replace index `index_def.id` with a new definition; returns the previous
        index set (for undo). Altering the primary key rebuilds every index, since
        non-unique secondaries order their entries by primary key too."""
        previous = self.indexes
        tuples = self._all_tuples()
        defs = {iid: index.index_def for iid, index in previous.items()}
        defs[index_def.id] = index_def
        rebuild = sorted(defs) if index_def.id == 0 else [index_def.id]
        self.indexes = {iid: index for iid, index in previous.items() if iid not in rebuild}
        try:
            for iid in rebuild:
                self.create_index(defs[iid], tuples)
        except BaseException:
            self.restore_indexes(previous)
            raise
        return previous

    def restore_indexes(self, indexes: dict[int, Index]) -> None:
        self.indexes = indexes
        self._rebuild_format()

    def create_index(self, index_def: IndexDef, tuples: list | None = None) -> Index:
        """Add an index, built from the primary key's tuples (the memory part of an
        _index insert)."""
        if index_def.id in self.indexes:
            raise ClientError(ErrorCode.ER_INDEX_EXISTS, index_def.name)
        if any(idx.name == index_def.name for idx in self.indexes.values()):
            raise ClientError(ErrorCode.ER_INDEX_EXISTS_IN_SPACE, index_def.name, self.name)
        for part in index_def.key_def.parts:
            if part.type not in INDEXABLE and index_def.type is not IndexType.RTREE:
                raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, self.name,
                                  f"field type '{part.type.value}' is not supported")
        pk = self.primary
        if index_def.id == 0:
            if not index_def.unique:
                raise ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, self.name,
                                  "primary key must be unique")
            if index_def.key_def.is_nullable:
                raise ClientError(ErrorCode.ER_NULLABLE_PRIMARY, self.name)
        elif pk is None:
            raise ClientError(ErrorCode.ER_ALTER_SPACE, self.name,
                              "can not add a secondary key before primary")
        if index_def.type is IndexType.HASH and index_def.key_def.is_nullable:
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "HASH", "nullable parts")
        index = make_index(self, index_def, pk.key_def if pk is not None else None)
        previous = (self._checks, self._required, self._paths)
        self._rebuild_format(extra=index_def)
        try:
            if tuples is None:
                tuples = self._all_tuples()
            for tup in tuples:
                self.validate_tuple(tup)
            index.build(tuples)
        except ClientError:
            self._set_checks(*previous)
            raise
        self.indexes[index_def.id] = index
        self.indexes = dict(sorted(self.indexes.items()))
        return index

    def drop_index(self, index_id: int) -> None:
        self.index(index_id)   # refuses an index that does not exist
        if index_id == 0:
            if len(self.indexes) > 1:
                raise ClientError(ErrorCode.ER_DROP_PRIMARY_KEY, self.name)
            self._free_all()
        del self.indexes[index_id]
        self._rebuild_format()

    def _all_tuples(self) -> list:
        pk = self.primary
        return pk.tuples() if pk is not None else []

    # -- reading --------------------------------------------------------------

    def get(self, key: Any, index_id: int | str = 0) -> Any:
        return self.index(index_id).get(key)

    def select(self, key: Any = None, index_id: int | str = 0, iterator: Any = None, *,
               offset: int = 0, limit: int | None = None) -> list:
        return self.index(index_id).select(key, iterator, offset=offset, limit=limit)

    def pairs(self, key: Any = None, index_id: int | str = 0,
              iterator: Any = None) -> Iterator[Any]:
        return self.index(index_id).pairs(key, iterator)

    def count(self, key: Any = None, index_id: int | str = 0, iterator: Any = None) -> int:
        return self.index(index_id).count(key, iterator)

    def len(self) -> int:
        return len(self.index(0))

    def __len__(self) -> int:
        pk = self.primary
        return 0 if pk is None else len(pk)

    def bsize(self) -> int:
        """Bytes of tuple data (MsgPack), as space:bsize() counts."""
        return self._bsize

    # -- DML entry points -----------------------------------------------------

    def _request(self, type: int, **fields: Any) -> DmlRequest:
        return DmlRequest(type=type, space_id=self.id, **fields)

    # these two run for every Lua insert/replace
    def insert(self, tup: Sequence[Any]) -> tuple:
        return self.put(tup, _INSERT)

    def replace(self, tup: Sequence[Any]) -> tuple:
        return self.put(tup, _REPLACE)

    def put(self, tup: Sequence[Any], rtype: int) -> tuple:
        """INSERT (`rtype` _INSERT) or REPLACE of a whole tuple: TxnManager.execute of
        a PutRequest, or put_in_txn() inside an open transaction."""
        txns = self.txns
        txn = txns.open.get(txns.fiber_key())
        if txn is None:
            REQUESTS[rtype] += 1                 # box.stat(): put_in_txn counts its own
            return txns.execute(self, PutRequest(rtype, self.id, tup))
        return self.put_in_txn(txn, tup, rtype)

    def put_in_txn(self, txn: Txn, tup: Sequence[Any], rtype: int) -> tuple:
        """put() inside `txn`, the running fiber's open transaction, with the usual
        statement run in this one frame: a transaction of this instance's own
        (not an applier's), a memtx space with no trigger. That statement is what
        execute() + execute_stmt() make of it, in their order: the sequence's
        value in place (sequence_tuple), the tuple stored (_put), then the
        statement and its redo row join the transaction (a failure before that
        leaves nothing to undo: the indexes refuse all or nothing). Anything else
        takes execute()."""
        REQUESTS[rtype] += 1
        if (txn.replicated or self.engine != "memtx" or len(self.before_replace)
                or len(self.on_replace)):
            return self.txns.execute(self, PutRequest(rtype, self.id, tup))
        if self.sequence is not None:        # execute_stmt's handle_sequence
            tup = sequence_tuple(self, tup)
        new, displaced, data = self._put(tup, _STORE_MODE[rtype])
        if data is None:
            # a value MsgPack cannot hold: execute() fails in the redo row after
            # the index changed, and undoes that
            self.undo(displaced, new)
            return self.txns.execute(self, PutRequest(rtype, self.id, tup))
        row = None if self.is_temporary else put_row(rtype, self.id, data, self.group_id)
        # no request: only execute() reads one, and this statement is done with it
        txn.statements.append(Statement(self, None, displaced, new, data, row))
        return new

    def delete(self, key: Any, index_id: int = 0) -> tuple | None:
        REQUESTS[_DELETE] += 1
        return self.txns.execute(self, self._request(
            IprotoType.DELETE, index_id=index_id, key=normalize_key(key)))

    def update(self, key: Any, ops: Any, index_id: int = 0, index_base: int = 1) -> tuple | None:
        REQUESTS[_UPDATE] += 1
        return self.txns.execute(self, self._request(
            IprotoType.UPDATE, index_id=index_id, key=normalize_key(key), ops=ops,
            index_base=index_base))

    def upsert(self, tup: Sequence[Any], ops: Any, index_base: int = 1) -> None:
        REQUESTS[_UPSERT] += 1
        return self.txns.execute(self, self._request(
            IprotoType.UPSERT, tuple=tup, ops=ops, index_base=index_base))

    def recover_replace(self, tup: Sequence[Any]) -> None:
        """REPLACE of a snapshot row during recovery (memtx loading its snapshot).
        With no trigger to run and no transaction open, nothing but the format check
        and the indexes takes part, so the autocommit statement (and the redo row
        nobody would write) is skipped; otherwise it is `replace()`."""
        if (self.engine != "memtx" or len(self.before_replace) or len(self.on_replace)
                or self.txns.current is not None):
            self.replace(tup)
            return
        self._replace_all(None, self.validate_tuple(tup), DupMode.REPLACE_OR_INSERT)

    def load_rows(self, tuples: Sequence[Sequence[Any]]) -> None:
        """What autocommit REPLACEs of `tuples`, one by one, do to an empty memtx space
        with no before_replace trigger, outside any transaction and with no journal
        (the bootstrap rows), at a fraction of the cost: the indexes are built in
        one pass, then the on_replace triggers run per row, in order. The rows must
        not repeat a unique key (build() refuses them, as a snapshot's loader does)."""
        stored = [self.validate_tuple(tup) for tup in tuples]
        for index in self.indexes.values():
            index.build(stored)
        size = sum(map(tuple_bsize, stored))
        self._bsize += size
        if len(self.on_replace):
            for tup in stored:
                self.on_replace.run(None, tup, self.name, "REPLACE")

    def execute_request(self, request: DmlRequest) -> Any:
        """Run a decoded IPROTO DML request of a client (box.stat() counts it)."""
        REQUESTS[request.type] += 1
        return self.txns.execute(self, request)

    def truncate(self) -> list:
        """The memory part of truncation: empty every index; returns the removed tuples
        in primary key order (the caller owns logging and undo via _truncate)."""
        removed = self._all_tuples()
        self._free_all()
        for idx in self.indexes.values():
            idx.clear()
        return removed

    def _free_all(self) -> None:
        """Every tuple leaves the space (truncation, the primary key dropped)."""
        self._bsize = 0

    # -- execution -------------------------------------------------------------

    def execute_stmt(self, stmt: Statement) -> Any:
        """Run a statement inside its transaction (called by TxnManager.execute)."""
        if self.sequence is not None:           # auto-increment: before the triggers
            handle_sequence(self, stmt)
        if len(self.before_replace):
            self._run_before_replace(stmt)
        request = stmt.request
        assert request is not None       # (execute()'s statements carry one)
        rtype = request.type
        if self.engine == "blackhole":
            return self._execute_blackhole(stmt)
        if rtype == _INSERT or rtype == _REPLACE:
            new, stmt.old_tuple, stmt.tuple_data = self._put(request.tuple, _STORE_MODE[rtype],
                                                             request.data)
            stmt.new_tuple = new
            return new
        if rtype == IprotoType.DELETE:
            index, key = self._find_by_key(request)
            old = index.find(key)
            if old is not None:
                stmt.old_tuple = self._replace_all(old, None, DupMode.REPLACE_OR_INSERT)
                self._rebind(stmt, old)
            return old
        if rtype == IprotoType.UPDATE:
            index, key = self._find_by_key(request)
            old = index.find(key)
            if old is None:
                return None
            new = update_tuple(old, request.ops, index_base=request.index_base,
                               field_names=self._field_names)
            new = self.validate_tuple(new)
            stmt.old_tuple = self._replace_all(old, new, DupMode.REPLACE)
            stmt.new_tuple = new
            self._rebind(stmt, new)
            return new
        if rtype == IprotoType.UPSERT:
            self._execute_upsert(stmt)
            return None
        if rtype == IprotoType.NOP:
            return None
        raise ClientError(ErrorCode.ER_UNKNOWN_REQUEST_TYPE, rtype)

    def _put(self, tup: Any, mode: DupMode, data: bytes | None = None
             ) -> tuple[tuple, Any, bytes | None]:
        """The INSERT/REPLACE of `tup` (a tuple, or a list as MsgPack decodes one)
        in every index: the format check (validate_tuple's, inline), the tuple
        packed once (for bsize here, for the redo row later; None when MsgPack
        cannot hold a value), then _replace_all, inline for a lone primary key.
        `data`: the tuple's MsgPack as its row carried it (PutRequest.data), taken
        as its packing: a replicated INSERT is not packed again for its length.
        Returns (the stored tuple, the one it displaced, the packed tuple)."""
        new = tup
        if type(new) is list:
            new = tuple(new)
        # the compiled format check; the usual format, a lone unsigned key, is
        # tested here without a call (format_check's fits_uint_key, inline)
        uint_key_len = self._uint_key_len
        if type(new) is not tuple or not (
                (uint_key_len and len(new) >= uint_key_len and type(key := new[0]) is int
                 and 0 <= key <= UINT64_MAX) or self._fits(new)):
            new = self.validate_tuple(new)
        if data is None:
            data = pack_tuple(new)
        indexes = self.indexes
        pk = indexes.get(0)
        if len(indexes) != 1 or pk is None:
            return new, self._replace_all(None, new, mode, data), data
        if data is not None:
            size = len(data)
            if self._bsize + size > self._bsize_granted or size > self.arena.max_data:
                self.arena.grant(self, size)    # memtx_tuple_new: before any index
        displaced = pk.replace(None, new, mode)
        if displaced is None and data is not None:
            self._bsize += size
        else:
            self._account(displaced, new, data)
        return new, displaced, data

    def _find_by_key(self, request: DmlRequest | PutRequest) -> tuple[Index, list]:
        index = self._unique_index(request.index_id)
        key = normalize_key(request.key)
        index.key_def.validate_exact_key(key)
        return index, key

    def _rebind(self, stmt: Statement, found: tuple) -> None:
        """request_rebind_to_primary_key(): log secondary-key requests by primary key."""
        request = stmt.request
        assert request is not None       # (execute()'s statements carry one)
        if request.index_id != 0:
            pk = self.primary
            assert pk is not None   # a tuple was found: the space has its primary index
            stmt.request = DmlRequest(type=request.type, space_id=request.space_id,
                                      index_base=request.index_base,
                                      key=pk.key_def.extract_key(found),
                                      ops=request.ops)

    def _execute_upsert(self, stmt: Statement) -> None:
        request = stmt.request
        assert request is not None       # (execute()'s statements carry one)
        tup = self.validate_tuple(request.tuple)
        pk = self._unique_index(0)
        old = pk.find(pk.key_def.extract_key(tup))
        if old is None:
            check_ops(request.ops, index_base=request.index_base,
                      field_names=self._field_names)
            new = tup
        else:
            new = upsert_tuple(old, request.ops, index_base=request.index_base,
                               field_names=self._field_names, on_error=self.log_upsert_error)
            new = self.validate_tuple(new)
            if pk.key_def.compare(old, new) != 0:
                self.log_upsert_error(ClientError(ErrorCode.ER_CANT_UPDATE_PRIMARY_KEY,
                                                  pk.name, self.name))
                return
        stmt.old_tuple = self._replace_all(old, new, DupMode.REPLACE_OR_INSERT)
        stmt.new_tuple = new

    def log_upsert_error(self, err: ClientError) -> None:
        log.error("UPSERT operation failed: %s", err)

    def _execute_blackhole(self, stmt: Statement) -> Any:
        request = stmt.request
        assert request is not None       # (execute()'s statements carry one)
        if request.type not in (IprotoType.INSERT, IprotoType.REPLACE):
            raise ClientError(ErrorCode.ER_UNSUPPORTED, "Blackhole",
                              f"{IprotoType(request.type).name.lower()}()")
        stmt.new_tuple = self.validate_tuple(request.tuple)
        return stmt.new_tuple

    # -- index maintenance ----------------------------------------------------

    def _replace_all(self, old: Any, new: Any, mode: DupMode,
                     new_data: bytes | None = None) -> Any:
        """memtx_space_replace_all_keys(): all-or-nothing across indexes; returns the
        tuple that left the space (old, or a replaced duplicate). `new_data`: `new`
        packed, when the caller has it."""
        indexes = self.indexes
        pk = indexes.get(0)
        if pk is None or next(iter(indexes)) != 0:
            raise ClientError(ErrorCode.ER_NO_SUCH_INDEX_ID, 0, self.name)
        size = 0                                  # (`new`'s bytes: read only with `new`)
        if new is not None:                       # memtx_tuple_new's quota check
            size = len(new_data) if new_data is not None else tuple_bsize(new)
            if self._bsize + size > self._bsize_granted or size > self.arena.max_data:
                self.arena.grant(self, size)
        displaced = pk.replace(old, new, mode)
        if len(indexes) == 1:
            if displaced is None and new_data is not None:
                self._bsize += size               # _account() of a plain insert
            else:
                self._account(displaced, new, new_data, size)
            return displaced
        done = [pk]
        try:
            for idx in list(indexes.values())[1:]:
                idx.replace(displaced, new, DupMode.INSERT)
                done.append(idx)
        except BaseException:
            for idx in reversed(done):
                if new is not None:
                    idx.delete_raw(new)
                if displaced is not None:
                    idx.insert_raw(displaced)
            raise
        self._account(displaced, new, new_data, size)
        return displaced

    def undo(self, old: Any, new: Any) -> None:
        """Put `old` back where `new` is, in every index (statement rollback)."""
        if self.engine == "blackhole" or (old is None and new is None):
            return
        for idx in self.indexes.values():
            if new is not None:
                idx.delete_raw(new)
            if old is not None:
                idx.insert_raw(old)
        self._account(new, old)

    def _account(self, removed: Any, added: Any, added_data: bytes | None = None,
                 added_size: int | None = None) -> None:
        """bsize: `removed` leaves, `added` (packed as `added_data`, or of
        `added_size` MsgPack bytes, when the caller knows) comes."""
        if removed is not None:
            self._bsize -= tuple_bsize(removed)
        if added_data is not None:
            self._bsize += len(added_data)
        elif added is not None:
            self._bsize += added_size if added_size is not None else tuple_bsize(added)

    # -- before_replace ---------------------------------------------------------

    def _run_before_replace(self, stmt: Statement) -> None:
        """space_before_replace(): compute old/new, run the triggers, rewrite the request
        if they changed the result."""
        request = stmt.request
        assert request is not None       # (execute()'s statements carry one)
        rtype = request.type
        pk = self.primary
        old = None
        if rtype in (IprotoType.UPDATE, IprotoType.DELETE):
            index, key = self._find_by_key(request)
            old = index.find(key)
        elif rtype in (IprotoType.INSERT, IprotoType.REPLACE, IprotoType.UPSERT):
            if pk is not None:
                if not isinstance(request.tuple, (list, tuple)):
                    raise ClientError(ErrorCode.ER_TUPLE_NOT_ARRAY)
                key = pk.key_def.extract_key(request.tuple)
                pk.key_def.validate_exact_key(key)
                old = pk.find(key)
        else:
            return
        if rtype in (IprotoType.INSERT, IprotoType.REPLACE):
            # INSERT/REPLACE/UPSERT carry a tuple (the decoders and Space's DML set one)
            assert request.tuple is not None
            new = tuple(request.tuple)
        elif rtype == IprotoType.UPDATE:
            if old is None:
                return
            new = update_tuple(old, request.ops, index_base=request.index_base,
                               field_names=self._field_names)
        elif rtype == IprotoType.DELETE:
            if old is None:
                return
            new = None
        elif old is None:   # UPSERT that inserts
            assert request.tuple is not None   # (see INSERT above)
            new = tuple(request.tuple)
            check_ops(request.ops, index_base=request.index_base, field_names=self._field_names)
        else:
            new = upsert_tuple(old, request.ops, index_base=request.index_base,
                               field_names=self._field_names, on_error=self.log_upsert_error)
        result = new
        op = IprotoType(rtype).name
        for trigger in self.before_replace:
            ret = trigger(old, result, self.name, op)
            if ret is None:
                continue
            if ret is NULL_TUPLE:
                result = None
            elif isinstance(ret, (tuple, list)):
                result = ret if type(ret) is tuple else tuple(ret)
            else:
                raise ClientError(ErrorCode.ER_BEFORE_REPLACE_RET, type(ret).__name__)
        if result is new:
            return
        if (pk is not None and old is not None and result is not None
                and pk.key_def.compare(old, result) != 0):
            raise ClientError(ErrorCode.ER_CANT_UPDATE_PRIMARY_KEY, pk.name, self.name)
        stmt.request = self._request_from_tuple(old, result)

    def _request_from_tuple(self, old: Any, new: Any) -> DmlRequest:
        """request_create_from_tuple()."""
        if old is new:
            return DmlRequest(type=IprotoType.NOP, space_id=self.id)
        if new is None:
            pk = self.primary
            assert pk is not None   # `old` was found: the space has its primary index
            return self._request(IprotoType.DELETE, key=pk.key_def.extract_key(old))
        return self._request(IprotoType.REPLACE, tuple=new)
