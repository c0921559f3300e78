"""IPROTO numbers of Tarantool 2.6.0: header/body keys, request types, flags.

Facts from src/box/iproto_constants.h of the 2.6.0 tag (see
../shared/reference/iproto.md). Members are named as in Tarantool without the
`IPROTO_` prefix (`IprotoKey.SYNC` is IPROTO_SYNC); the prefixed names are also
exported at module level so code can be grepped against Tarantool's source.
Values that only newer Tarantool versions know are marked; a 2.6.0 peer rejects
them, so they are for recognising newer peers.
"""
from __future__ import annotations

import enum

IPROTO_GREETING_SIZE = 128
# Largest body (and xlog block payload) length accepted: 2 GiB.
IPROTO_BODY_LEN_MAX = 2147483648
# magic + len + prev crc32 + crc32 + padding: every xlog block header has this size.
XLOG_FIXHEADER_SIZE = 19


def version_id(major: int, minor: int, patch: int) -> int:
    return (major << 16) | (minor << 8) | patch


class IprotoKey(enum.IntEnum):
    # header
    REQUEST_TYPE = 0x00
    SYNC = 0x01
    REPLICA_ID = 0x02
    LSN = 0x03
    TIMESTAMP = 0x04
    SCHEMA_VERSION = 0x05
    SERVER_VERSION = 0x06
    GROUP_ID = 0x07
    TSN = 0x08
    FLAGS = 0x09
    # body: integer keys
    SPACE_ID = 0x10
    INDEX_ID = 0x11
    LIMIT = 0x12
    OFFSET = 0x13
    ITERATOR = 0x14
    INDEX_BASE = 0x15
    # body: all keys
    KEY = 0x20
    TUPLE = 0x21
    FUNCTION_NAME = 0x22
    USER_NAME = 0x23
    INSTANCE_UUID = 0x24
    CLUSTER_UUID = 0x25
    VCLOCK = 0x26
    EXPR = 0x27
    OPS = 0x28
    BALLOT = 0x29
    TUPLE_META = 0x2A
    OPTIONS = 0x2B
    # response
    DATA = 0x30
    ERROR_24 = 0x31
    METADATA = 0x32
    BIND_METADATA = 0x33
    BIND_COUNT = 0x34
    # SQL
    SQL_TEXT = 0x40
    SQL_BIND = 0x41
    SQL_INFO = 0x42
    STMT_ID = 0x43
    # additional request keys
    REPLICA_ANON = 0x50
    ID_FILTER = 0x51
    ERROR = 0x52
    # not in 2.6.0 (a 2.6.0 header decoder rejects any key >= KEY_MAX)
    TERM = 0x53            # 2.6.3, 2.7.2, 2.8.1
    VERSION = 0x54         # 2.10
    FEATURES = 0x55        # 2.10
    AUTH_TYPE = 0x5B       # 2.10


# One past the last key 2.6.0 knows; its strict header decoder stops here.
IPROTO_KEY_MAX = 0x53


class MpType(enum.IntEnum):
    """msgpuck's mp_type: what a 2.6.0 decoder checks a key's value against."""

    NIL = 0
    UINT = 1
    INT = 2
    STR = 3
    BIN = 4
    ARRAY = 5
    MAP = 6
    BOOL = 7
    FLOAT = 8
    DOUBLE = 9
    EXT = 10


def _key_types() -> tuple[MpType, ...]:
    table = [MpType.NIL] * IPROTO_KEY_MAX
    for key in range(0x00, 0x20):
        table[key] = MpType.UINT
    table[IprotoKey.TIMESTAMP] = MpType.DOUBLE
    for key, mp_type in (
        (IprotoKey.KEY, MpType.ARRAY), (IprotoKey.TUPLE, MpType.ARRAY),
        (IprotoKey.FUNCTION_NAME, MpType.STR), (IprotoKey.USER_NAME, MpType.STR),
        (IprotoKey.INSTANCE_UUID, MpType.STR), (IprotoKey.CLUSTER_UUID, MpType.STR),
        (IprotoKey.VCLOCK, MpType.MAP), (IprotoKey.EXPR, MpType.STR),
        (IprotoKey.OPS, MpType.ARRAY), (IprotoKey.BALLOT, MpType.MAP),
        (IprotoKey.TUPLE_META, MpType.MAP), (IprotoKey.OPTIONS, MpType.MAP),
    ):
        table[key] = mp_type
    return tuple(table)


# iproto_key_type[] of 2.6.0: 0x00-0x1f uint (TIMESTAMP double), 0x20-0x2b as
# listed, 0x2c-0x52 left zero-initialised in C, i.e. MP_NIL.
IPROTO_KEY_TYPE: tuple[MpType, ...] = _key_types()

# Keys a DML body decoder looks at; everything else is skipped whatever its type.
DML_BODY_KEYS = frozenset({
    IprotoKey.SPACE_ID, IprotoKey.INDEX_ID, IprotoKey.LIMIT, IprotoKey.OFFSET,
    IprotoKey.ITERATOR, IprotoKey.INDEX_BASE, IprotoKey.KEY, IprotoKey.TUPLE,
    IprotoKey.OPS, IprotoKey.TUPLE_META,
})


class IprotoType(enum.IntEnum):
    """REQUEST_TYPE values (requests and the OK/CHUNK/error responses)."""

    OK = 0
    SELECT = 1
    INSERT = 2
    REPLACE = 3
    UPDATE = 4
    DELETE = 5
    CALL_16 = 6
    AUTH = 7
    EVAL = 8
    UPSERT = 9
    CALL = 10
    EXECUTE = 11
    NOP = 12
    PREPARE = 13
    TYPE_STAT_MAX = 14
    RAFT = 30              # 2.6.1+
    PROMOTE = 31           # 2.6.3, 2.7.2, 2.8.1+
    CONFIRM = 40
    ROLLBACK = 41
    PING = 64
    JOIN = 65
    SUBSCRIBE = 66
    VOTE_DEPRECATED = 67
    VOTE = 68
    FETCH_SNAPSHOT = 69
    REGISTER = 70
    JOIN_META = 71         # 2.7.3, 2.8.2+: the JOIN stage before the snapshot
    JOIN_SNAPSHOT = 72     # (raft and limbo state) and its end
    ID = 73                # 2.10+
    VY_INDEX_RUN_INFO = 100
    VY_INDEX_PAGE_INFO = 101
    VY_RUN_ROW_INDEX = 102
    CHUNK = 128
    TYPE_ERROR = 1 << 15


IPROTO_TYPE_ERROR = IprotoType.TYPE_ERROR


def is_error_type(request_type: int) -> bool:
    return (request_type & IPROTO_TYPE_ERROR) != 0


def error_code_of(request_type: int) -> int:
    return request_type & (IPROTO_TYPE_ERROR - 1)


def is_dml(request_type: int) -> bool:
    """iproto_type_is_dml(): SELECT..DELETE, UPSERT and NOP."""
    return (IprotoType.SELECT <= request_type <= IprotoType.DELETE
            or request_type in (IprotoType.UPSERT, IprotoType.NOP))


def is_synchro(request_type: int) -> bool:
    """iproto_type_is_synchro_request: CONFIRM, ROLLBACK and (2.6.3) PROMOTE."""
    return request_type in (IprotoType.CONFIRM, IprotoType.ROLLBACK, IprotoType.PROMOTE)


_TYPE_NAMES: dict[int, str] = {
    IprotoType.SELECT: "SELECT", IprotoType.INSERT: "INSERT", IprotoType.REPLACE: "REPLACE",
    IprotoType.UPDATE: "UPDATE", IprotoType.DELETE: "DELETE", IprotoType.AUTH: "AUTH",
    IprotoType.EVAL: "EVAL", IprotoType.UPSERT: "UPSERT", IprotoType.CALL: "CALL",
    IprotoType.EXECUTE: "EXECUTE", IprotoType.NOP: "NOP", IprotoType.PREPARE: "PREPARE",
    IprotoType.VY_INDEX_RUN_INFO: "RUNINFO", IprotoType.VY_INDEX_PAGE_INFO: "PAGEINFO",
    IprotoType.VY_RUN_ROW_INDEX: "ROWINDEX",
}


def type_name(request_type: int) -> str | None:
    """iproto_type_name(): what `tarantoolctl cat` prints; None for types it
    shows as a number (OK, CALL_16, CONFIRM 40, ROLLBACK 41, ...)."""
    return _TYPE_NAMES.get(request_type)


class IprotoFlag(enum.IntFlag):
    COMMIT = 0x01          # last row of a multi-row transaction
    WAIT_SYNC = 0x02       # 2.7+ (not in 2.6.0)
    WAIT_ACK = 0x04        # 2.7+ (not in 2.6.0)



class GroupId(enum.IntEnum):
    DEFAULT = 0            # replicated
    LOCAL = 1              # rows of is_local spaces: never relayed as data


class BallotKey(enum.IntEnum):
    IS_RO = 0x01
    VCLOCK = 0x02
    GC_VCLOCK = 0x03
    IS_LOADING = 0x04
    IS_ANON = 0x05         # 2.6.1+


class MetadataKey(enum.IntEnum):
    FIELD_NAME = 0
    FIELD_TYPE = 1
    FIELD_COLL = 2
    FIELD_IS_NULLABLE = 3
    FIELD_IS_AUTOINCREMENT = 4
    FIELD_SPAN = 5


class ErrorKey(enum.IntEnum):
    """Keys of the IPROTO_ERROR (0x52) map."""

    STACK = 0x00


class ErrorStackKey(enum.IntEnum):
    """Keys of each error map inside the IPROTO_ERROR stack."""

    TYPE = 0x00
    FILE = 0x01
    LINE = 0x02
    MESSAGE = 0x03
    ERRNO = 0x04
    CODE = 0x05
    FIELDS = 0x06


class RaftKey(enum.IntEnum):
    """Body keys of IPROTO_RAFT rows (2.6.1+)."""

    TERM = 0
    VOTE = 1
    STATE = 2
    VCLOCK = 3


class IteratorType(enum.IntEnum):
    EQ = 0
    REQ = 1
    ALL = 2
    LT = 3
    LE = 4
    GE = 5
    GT = 6
    BITS_ALL_SET = 7
    BITS_ANY_SET = 8
    BITS_ALL_NOT_SET = 9
    OVERLAPS = 10
    NEIGHBOR = 11


def _export_prefixed() -> list[str]:
    names = []
    for enum_cls, prefix in ((IprotoKey, "IPROTO_"), (IprotoType, "IPROTO_"),
                             (BallotKey, "IPROTO_BALLOT_"), (RaftKey, "IPROTO_RAFT_"),
                             (MetadataKey, "IPROTO_")):
        for member in enum_cls:
            name = prefix + member.name
            if name not in globals():
                globals()[name] = member
                names.append(name)
    return names


_PREFIXED = _export_prefixed()
# Tarantool's own spelling for the local group id.
GROUP_LOCAL = GroupId.LOCAL

# iproto_key_strs[] of 2.6.0: names used in messages such as ER_MISSING_REQUEST_FIELD.
IPROTO_KEY_NAMES: dict[int, str] = {
    0x00: "type", 0x01: "sync", 0x02: "replica id", 0x03: "lsn", 0x04: "timestamp",
    0x05: "schema version", 0x06: "server version", 0x07: "group id", 0x08: "tsn",
    0x09: "flags", 0x10: "space id", 0x11: "index id", 0x12: "limit", 0x13: "offset",
    0x14: "iterator", 0x15: "index base", 0x20: "key", 0x21: "tuple",
    0x22: "function name", 0x23: "user name", 0x24: "instance uuid",
    0x25: "cluster uuid", 0x26: "vector clock", 0x27: "expression", 0x28: "operations",
    0x29: "ballot", 0x2A: "tuple meta", 0x2B: "options", 0x30: "data", 0x31: "error",
    0x32: "metadata", 0x33: "bind meta", 0x34: "bind count", 0x40: "SQL text",
    0x41: "SQL bind", 0x42: "SQL info", 0x43: "stmt id",
}

# iproto_body_key_map[]: body keys a DML request must carry (else ER_MISSING_REQUEST_FIELD).
DML_MANDATORY_KEYS: dict[int, tuple[int, ...]] = {
    IprotoType.SELECT: (IprotoKey.SPACE_ID, IprotoKey.LIMIT, IprotoKey.KEY),
    IprotoType.INSERT: (IprotoKey.SPACE_ID, IprotoKey.TUPLE),
    IprotoType.REPLACE: (IprotoKey.SPACE_ID, IprotoKey.TUPLE),
    IprotoType.UPDATE: (IprotoKey.SPACE_ID, IprotoKey.KEY, IprotoKey.TUPLE),
    IprotoType.DELETE: (IprotoKey.SPACE_ID, IprotoKey.KEY),
    IprotoType.UPSERT: (IprotoKey.SPACE_ID, IprotoKey.TUPLE, IprotoKey.OPS),
    IprotoType.NOP: (),
}
