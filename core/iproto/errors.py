"""Tarantool errors: codes, message templates and the ClientError family.

Every refusal Spindle makes is one of these, so a client sees the same code and
text that Tarantool 2.6.0 would send.

The code table and the templates are facts read out of the Tarantool 2.6.0 binary
(its `box_error_codes` table), cross-checked against
shared/fixtures/tarantool-2.6/box_error_codes.txt. Templates are converted to
Python %-format: C's `%u`, `%llu` and `%lld` become `%d`; `%s`, `%d`, `%c` and
`%.*s` (which takes a length, then a string) are kept, as Python understands them.

Two codes exist in 2.6.0 but are missing from Lua's `box.error` table (and so from
the fixture file): 67 REPLICA_ID_IS_RESERVED and 183 SQL_KEYWORD_IS_RESERVED.
(measured: the names left out are exactly those containing "RESERVED"). The server
still sends these codes over IPROTO, so they are members here, and
LUA_HIDDEN_CODES lists them for whoever builds the Lua table.
"""
from __future__ import annotations

import enum
import re

from spindle.core import log


class ErrorCode(enum.IntEnum):
    ER_UNKNOWN = 0
    ER_ILLEGAL_PARAMS = 1
    ER_MEMORY_ISSUE = 2
    ER_TUPLE_FOUND = 3
    ER_TUPLE_NOT_FOUND = 4
    ER_UNSUPPORTED = 5
    ER_NONMASTER = 6
    ER_READONLY = 7
    ER_INJECTION = 8
    ER_CREATE_SPACE = 9
    ER_SPACE_EXISTS = 10
    ER_DROP_SPACE = 11
    ER_ALTER_SPACE = 12
    ER_INDEX_TYPE = 13
    ER_MODIFY_INDEX = 14
    ER_LAST_DROP = 15
    ER_TUPLE_FORMAT_LIMIT = 16
    ER_DROP_PRIMARY_KEY = 17
    ER_KEY_PART_TYPE = 18
    ER_EXACT_MATCH = 19
    ER_INVALID_MSGPACK = 20
    ER_PROC_RET = 21
    ER_TUPLE_NOT_ARRAY = 22
    ER_FIELD_TYPE = 23
    ER_INDEX_PART_TYPE_MISMATCH = 24
    ER_UPDATE_SPLICE = 25
    ER_UPDATE_ARG_TYPE = 26
    ER_FORMAT_MISMATCH_INDEX_PART = 27
    ER_UNKNOWN_UPDATE_OP = 28
    ER_UPDATE_FIELD = 29
    ER_FUNCTION_TX_ACTIVE = 30
    ER_KEY_PART_COUNT = 31
    ER_PROC_LUA = 32
    ER_NO_SUCH_PROC = 33
    ER_NO_SUCH_TRIGGER = 34
    ER_NO_SUCH_INDEX_ID = 35
    ER_NO_SUCH_SPACE = 36
    ER_NO_SUCH_FIELD_NO = 37
    ER_EXACT_FIELD_COUNT = 38
    ER_FIELD_MISSING = 39
    ER_WAL_IO = 40
    ER_MORE_THAN_ONE_TUPLE = 41
    ER_ACCESS_DENIED = 42
    ER_CREATE_USER = 43
    ER_DROP_USER = 44
    ER_NO_SUCH_USER = 45
    ER_USER_EXISTS = 46
    ER_PASSWORD_MISMATCH = 47
    ER_UNKNOWN_REQUEST_TYPE = 48
    ER_UNKNOWN_SCHEMA_OBJECT = 49
    ER_CREATE_FUNCTION = 50
    ER_NO_SUCH_FUNCTION = 51
    ER_FUNCTION_EXISTS = 52
    ER_BEFORE_REPLACE_RET = 53
    ER_MULTISTATEMENT_TRANSACTION = 54
    ER_TRIGGER_EXISTS = 55
    ER_USER_MAX = 56
    ER_NO_SUCH_ENGINE = 57
    ER_RELOAD_CFG = 58
    ER_CFG = 59
    ER_SAVEPOINT_EMPTY_TX = 60
    ER_NO_SUCH_SAVEPOINT = 61
    ER_UNKNOWN_REPLICA = 62
    ER_REPLICASET_UUID_MISMATCH = 63
    ER_INVALID_UUID = 64
    ER_REPLICASET_UUID_IS_RO = 65
    ER_INSTANCE_UUID_MISMATCH = 66
    ER_REPLICA_ID_IS_RESERVED = 67
    ER_INVALID_ORDER = 68
    ER_MISSING_REQUEST_FIELD = 69
    ER_IDENTIFIER = 70
    ER_DROP_FUNCTION = 71
    ER_ITERATOR_TYPE = 72
    ER_REPLICA_MAX = 73
    ER_INVALID_XLOG = 74
    ER_INVALID_XLOG_NAME = 75
    ER_INVALID_XLOG_ORDER = 76
    ER_NO_CONNECTION = 77
    ER_TIMEOUT = 78
    ER_ACTIVE_TRANSACTION = 79
    ER_CURSOR_NO_TRANSACTION = 80
    ER_CROSS_ENGINE_TRANSACTION = 81
    ER_NO_SUCH_ROLE = 82
    ER_ROLE_EXISTS = 83
    ER_CREATE_ROLE = 84
    ER_INDEX_EXISTS = 85
    ER_SESSION_CLOSED = 86
    ER_ROLE_LOOP = 87
    ER_GRANT = 88
    ER_PRIV_GRANTED = 89
    ER_ROLE_GRANTED = 90
    ER_PRIV_NOT_GRANTED = 91
    ER_ROLE_NOT_GRANTED = 92
    ER_MISSING_SNAPSHOT = 93
    ER_CANT_UPDATE_PRIMARY_KEY = 94
    ER_UPDATE_INTEGER_OVERFLOW = 95
    ER_GUEST_USER_PASSWORD = 96
    ER_TRANSACTION_CONFLICT = 97
    ER_UNSUPPORTED_PRIV = 98
    ER_LOAD_FUNCTION = 99
    ER_FUNCTION_LANGUAGE = 100
    ER_RTREE_RECT = 101
    ER_PROC_C = 102
    ER_UNKNOWN_RTREE_INDEX_DISTANCE_TYPE = 103
    ER_PROTOCOL = 104
    ER_UPSERT_UNIQUE_SECONDARY_KEY = 105
    ER_WRONG_INDEX_RECORD = 106
    ER_WRONG_INDEX_PARTS = 107
    ER_WRONG_INDEX_OPTIONS = 108
    ER_WRONG_SCHEMA_VERSION = 109
    ER_MEMTX_MAX_TUPLE_SIZE = 110
    ER_WRONG_SPACE_OPTIONS = 111
    ER_UNSUPPORTED_INDEX_FEATURE = 112
    ER_VIEW_IS_RO = 113
    ER_NO_TRANSACTION = 114
    ER_SYSTEM = 115
    ER_LOADING = 116
    ER_CONNECTION_TO_SELF = 117
    ER_KEY_PART_IS_TOO_LONG = 118
    ER_COMPRESSION = 119
    ER_CHECKPOINT_IN_PROGRESS = 120
    ER_SUB_STMT_MAX = 121
    ER_COMMIT_IN_SUB_STMT = 122
    ER_ROLLBACK_IN_SUB_STMT = 123
    ER_DECOMPRESSION = 124
    ER_INVALID_XLOG_TYPE = 125
    ER_ALREADY_RUNNING = 126
    ER_INDEX_FIELD_COUNT_LIMIT = 127
    ER_LOCAL_INSTANCE_ID_IS_READ_ONLY = 128
    ER_BACKUP_IN_PROGRESS = 129
    ER_READ_VIEW_ABORTED = 130
    ER_INVALID_INDEX_FILE = 131
    ER_INVALID_RUN_FILE = 132
    ER_INVALID_VYLOG_FILE = 133
    ER_CHECKPOINT_ROLLBACK = 134
    ER_VY_QUOTA_TIMEOUT = 135
    ER_PARTIAL_KEY = 136
    ER_TRUNCATE_SYSTEM_SPACE = 137
    ER_LOAD_MODULE = 138
    ER_VINYL_MAX_TUPLE_SIZE = 139
    ER_WRONG_DD_VERSION = 140
    ER_WRONG_SPACE_FORMAT = 141
    ER_CREATE_SEQUENCE = 142
    ER_ALTER_SEQUENCE = 143
    ER_DROP_SEQUENCE = 144
    ER_NO_SUCH_SEQUENCE = 145
    ER_SEQUENCE_EXISTS = 146
    ER_SEQUENCE_OVERFLOW = 147
    ER_NO_SUCH_INDEX_NAME = 148
    ER_SPACE_FIELD_IS_DUPLICATE = 149
    ER_CANT_CREATE_COLLATION = 150
    ER_WRONG_COLLATION_OPTIONS = 151
    ER_NULLABLE_PRIMARY = 152
    ER_NO_SUCH_FIELD_NAME_IN_SPACE = 153
    ER_TRANSACTION_YIELD = 154
    ER_NO_SUCH_GROUP = 155
    ER_SQL_BIND_VALUE = 156
    ER_SQL_BIND_TYPE = 157
    ER_SQL_BIND_PARAMETER_MAX = 158
    ER_SQL_EXECUTE = 159
    ER_UPDATE_DECIMAL_OVERFLOW = 160
    ER_SQL_BIND_NOT_FOUND = 161
    ER_ACTION_MISMATCH = 162
    ER_VIEW_MISSING_SQL = 163
    ER_FOREIGN_KEY_CONSTRAINT = 164
    ER_NO_SUCH_MODULE = 165
    ER_NO_SUCH_COLLATION = 166
    ER_CREATE_FK_CONSTRAINT = 167
    ER_DROP_FK_CONSTRAINT = 168
    ER_NO_SUCH_CONSTRAINT = 169
    ER_CONSTRAINT_EXISTS = 170
    ER_SQL_TYPE_MISMATCH = 171
    ER_ROWID_OVERFLOW = 172
    ER_DROP_COLLATION = 173
    ER_ILLEGAL_COLLATION_MIX = 174
    ER_SQL_NO_SUCH_PRAGMA = 175
    ER_SQL_CANT_RESOLVE_FIELD = 176
    ER_INDEX_EXISTS_IN_SPACE = 177
    ER_INCONSISTENT_TYPES = 178
    ER_SQL_SYNTAX_WITH_POS = 179
    ER_SQL_STACK_OVERFLOW = 180
    ER_SQL_SELECT_WILDCARD = 181
    ER_SQL_STATEMENT_EMPTY = 182
    ER_SQL_KEYWORD_IS_RESERVED = 183
    ER_SQL_SYNTAX_NEAR_TOKEN = 184
    ER_SQL_UNKNOWN_TOKEN = 185
    ER_SQL_PARSER_GENERIC = 186
    ER_SQL_ANALYZE_ARGUMENT = 187
    ER_SQL_COLUMN_COUNT_MAX = 188
    ER_HEX_LITERAL_MAX = 189
    ER_INT_LITERAL_MAX = 190
    ER_SQL_PARSER_LIMIT = 191
    ER_INDEX_DEF_UNSUPPORTED = 192
    ER_CK_DEF_UNSUPPORTED = 193
    ER_MULTIKEY_INDEX_MISMATCH = 194
    ER_CREATE_CK_CONSTRAINT = 195
    ER_CK_CONSTRAINT_FAILED = 196
    ER_SQL_COLUMN_COUNT = 197
    ER_FUNC_INDEX_FUNC = 198
    ER_FUNC_INDEX_FORMAT = 199
    ER_FUNC_INDEX_PARTS = 200
    ER_NO_SUCH_FIELD_NAME = 201
    ER_FUNC_WRONG_ARG_COUNT = 202
    ER_BOOTSTRAP_READONLY = 203
    ER_SQL_FUNC_WRONG_RET_COUNT = 204
    ER_FUNC_INVALID_RETURN_TYPE = 205
    ER_SQL_PARSER_GENERIC_WITH_POS = 206
    ER_REPLICA_NOT_ANON = 207
    ER_CANNOT_REGISTER = 208
    ER_SESSION_SETTING_INVALID_VALUE = 209
    ER_SQL_PREPARE = 210
    ER_WRONG_QUERY_ID = 211
    ER_SEQUENCE_NOT_STARTED = 212
    ER_NO_SUCH_SESSION_SETTING = 213
    ER_UNCOMMITTED_FOREIGN_SYNC_TXNS = 214
    ER_SYNC_MASTER_MISMATCH = 215
    ER_SYNC_QUORUM_TIMEOUT = 216
    ER_SYNC_ROLLBACK = 217
    ER_TUPLE_METADATA_IS_TOO_BIG = 218


# Codes Tarantool 2.6.0 keeps out of Lua's box.error table (see module docstring).
LUA_HIDDEN_CODES = frozenset({ErrorCode.ER_REPLICA_ID_IS_RESERVED,
                              ErrorCode.ER_SQL_KEYWORD_IS_RESERVED})

# code -> template, exactly as Tarantool 2.6.0 words it (converted to Python %-format).
MESSAGES: dict[int, str] = {
    ErrorCode.ER_UNKNOWN: "Unknown error",
    ErrorCode.ER_ILLEGAL_PARAMS: "Illegal parameters, %s",
    ErrorCode.ER_MEMORY_ISSUE: "Failed to allocate %d bytes in %s for %s",
    ErrorCode.ER_TUPLE_FOUND: "Duplicate key exists in unique index '%s' in space '%s'",
    ErrorCode.ER_TUPLE_NOT_FOUND: "Tuple doesn't exist in index '%s' in space '%s'",
    ErrorCode.ER_UNSUPPORTED: "%s does not support %s",
    ErrorCode.ER_NONMASTER: "Can't modify data on a replication slave. My master is: %s",
    ErrorCode.ER_READONLY: "Can't modify data because this instance is in read-only mode.",
    ErrorCode.ER_INJECTION: "Error injection '%s'",
    ErrorCode.ER_CREATE_SPACE: "Failed to create space '%s': %s",
    ErrorCode.ER_SPACE_EXISTS: "Space '%s' already exists",
    ErrorCode.ER_DROP_SPACE: "Can't drop space '%s': %s",
    ErrorCode.ER_ALTER_SPACE: "Can't modify space '%s': %s",
    ErrorCode.ER_INDEX_TYPE: "Unsupported index type supplied for index '%s' in space '%s'",
    ErrorCode.ER_MODIFY_INDEX: "Can't create or modify index '%s' in space '%s': %s",
    ErrorCode.ER_LAST_DROP: "Can't drop the primary key in a system space, space '%s'",
    ErrorCode.ER_TUPLE_FORMAT_LIMIT: "Tuple format limit reached: %d",
    ErrorCode.ER_DROP_PRIMARY_KEY: "Can't drop primary key in space '%s' while secondary keys exist",
    ErrorCode.ER_KEY_PART_TYPE: "Supplied key type of part %d does not match index part type: expected %s",
    ErrorCode.ER_EXACT_MATCH: "Invalid key part count in an exact match (expected %d, got %d)",
    ErrorCode.ER_INVALID_MSGPACK: "Invalid MsgPack - %s",
    ErrorCode.ER_PROC_RET: "msgpack.encode: can not encode Lua type '%s'",
    ErrorCode.ER_TUPLE_NOT_ARRAY: "Tuple/Key must be MsgPack array",
    ErrorCode.ER_FIELD_TYPE: "Tuple field %s type does not match one required by operation: expected %s",
    ErrorCode.ER_INDEX_PART_TYPE_MISMATCH: "Field %s has type '%s' in one index, but type '%s' in another",
    ErrorCode.ER_UPDATE_SPLICE: "SPLICE error on field %s: %s",
    ErrorCode.ER_UPDATE_ARG_TYPE: "Argument type in operation '%c' on field %s does not match field type: expected %s",
    ErrorCode.ER_FORMAT_MISMATCH_INDEX_PART: "Field %s has type '%s' in space format, but type '%s' in index definition",
    ErrorCode.ER_UNKNOWN_UPDATE_OP: "Unknown UPDATE operation #%d: %s",
    ErrorCode.ER_UPDATE_FIELD: "Field %s UPDATE error: %s",
    ErrorCode.ER_FUNCTION_TX_ACTIVE: "Transaction is active at return from function",
    ErrorCode.ER_KEY_PART_COUNT: "Invalid key part count (expected [0..%d], got %d)",
    ErrorCode.ER_PROC_LUA: "%s",
    ErrorCode.ER_NO_SUCH_PROC: "Procedure '%.*s' is not defined",
    ErrorCode.ER_NO_SUCH_TRIGGER: "Trigger '%s' doesn't exist",
    ErrorCode.ER_NO_SUCH_INDEX_ID: "No index #%d is defined in space '%s'",
    ErrorCode.ER_NO_SUCH_SPACE: "Space '%s' does not exist",
    ErrorCode.ER_NO_SUCH_FIELD_NO: "Field %d was not found in the tuple",
    ErrorCode.ER_EXACT_FIELD_COUNT: "Tuple field count %d does not match space field count %d",
    ErrorCode.ER_FIELD_MISSING: "Tuple field %s required by space format is missing",
    ErrorCode.ER_WAL_IO: "Failed to write to disk",
    ErrorCode.ER_MORE_THAN_ONE_TUPLE: "Get() doesn't support partial keys and non-unique indexes",
    ErrorCode.ER_ACCESS_DENIED: "%s access to %s '%s' is denied for user '%s'",
    ErrorCode.ER_CREATE_USER: "Failed to create user '%s': %s",
    ErrorCode.ER_DROP_USER: "Failed to drop user or role '%s': %s",
    ErrorCode.ER_NO_SUCH_USER: "User '%s' is not found",
    ErrorCode.ER_USER_EXISTS: "User '%s' already exists",
    ErrorCode.ER_PASSWORD_MISMATCH: "Incorrect password supplied for user '%s'",
    ErrorCode.ER_UNKNOWN_REQUEST_TYPE: "Unknown request type %d",
    ErrorCode.ER_UNKNOWN_SCHEMA_OBJECT: "Unknown object type '%s'",
    ErrorCode.ER_CREATE_FUNCTION: "Failed to create function '%s': %s",
    ErrorCode.ER_NO_SUCH_FUNCTION: "Function '%s' does not exist",
    ErrorCode.ER_FUNCTION_EXISTS: "Function '%s' already exists",
    ErrorCode.ER_BEFORE_REPLACE_RET: "Invalid return value of space:before_replace trigger: expected tuple or nil, got %s",
    ErrorCode.ER_MULTISTATEMENT_TRANSACTION: "Can not perform %s in a multi-statement transaction",
    ErrorCode.ER_TRIGGER_EXISTS: "Trigger '%s' already exists",
    ErrorCode.ER_USER_MAX: "A limit on the total number of users has been reached: %d",
    ErrorCode.ER_NO_SUCH_ENGINE: "Space engine '%s' does not exist",
    ErrorCode.ER_RELOAD_CFG: "Can't set option '%s' dynamically",
    ErrorCode.ER_CFG: "Incorrect value for option '%s': %s",
    ErrorCode.ER_SAVEPOINT_EMPTY_TX: "Can not set a savepoint in an empty transaction",
    ErrorCode.ER_NO_SUCH_SAVEPOINT: "Can not rollback to savepoint: the savepoint does not exist",
    ErrorCode.ER_UNKNOWN_REPLICA: "Replica %s is not registered with replica set %s",
    ErrorCode.ER_REPLICASET_UUID_MISMATCH: "Replica set UUID mismatch: expected %s, got %s",
    ErrorCode.ER_INVALID_UUID: "Invalid UUID: %s",
    ErrorCode.ER_REPLICASET_UUID_IS_RO: "Can't reset replica set UUID: it is already assigned",
    ErrorCode.ER_INSTANCE_UUID_MISMATCH: "Instance UUID mismatch: expected %s, got %s",
    ErrorCode.ER_REPLICA_ID_IS_RESERVED: "Can't initialize replica id with a reserved value %d",
    ErrorCode.ER_INVALID_ORDER: "Invalid LSN order for instance %d: previous LSN = %d, new lsn = %d",
    ErrorCode.ER_MISSING_REQUEST_FIELD: "Missing mandatory field '%s' in request",
    ErrorCode.ER_IDENTIFIER: "Invalid identifier '%s' (expected printable symbols only or it is too long)",
    ErrorCode.ER_DROP_FUNCTION: "Can't drop function %d: %s",
    ErrorCode.ER_ITERATOR_TYPE: "Unknown iterator type '%s'",
    ErrorCode.ER_REPLICA_MAX: "Replica count limit reached: %d",
    ErrorCode.ER_INVALID_XLOG: "Failed to read xlog: %d",
    ErrorCode.ER_INVALID_XLOG_NAME: "Invalid xlog name: expected %d got %d",
    ErrorCode.ER_INVALID_XLOG_ORDER: "Invalid xlog order: %d and %d",
    ErrorCode.ER_NO_CONNECTION: "Connection is not established",
    ErrorCode.ER_TIMEOUT: "Timeout exceeded",
    ErrorCode.ER_ACTIVE_TRANSACTION: "Operation is not permitted when there is an active transaction ",
    ErrorCode.ER_CURSOR_NO_TRANSACTION: "The transaction the cursor belongs to has ended",
    ErrorCode.ER_CROSS_ENGINE_TRANSACTION: "A multi-statement transaction can not use multiple storage engines",
    ErrorCode.ER_NO_SUCH_ROLE: "Role '%s' is not found",
    ErrorCode.ER_ROLE_EXISTS: "Role '%s' already exists",
    ErrorCode.ER_CREATE_ROLE: "Failed to create role '%s': %s",
    ErrorCode.ER_INDEX_EXISTS: "Index '%s' already exists",
    ErrorCode.ER_SESSION_CLOSED: "Session is closed",
    ErrorCode.ER_ROLE_LOOP: "Granting role '%s' to role '%s' would create a loop",
    ErrorCode.ER_GRANT: "Incorrect grant arguments: %s",
    ErrorCode.ER_PRIV_GRANTED: "User '%s' already has %s access on %s%s",
    ErrorCode.ER_ROLE_GRANTED: "User '%s' already has role '%s'",
    ErrorCode.ER_PRIV_NOT_GRANTED: "User '%s' does not have %s access on %s '%s'",
    ErrorCode.ER_ROLE_NOT_GRANTED: "User '%s' does not have role '%s'",
    ErrorCode.ER_MISSING_SNAPSHOT: "Can't find snapshot",
    ErrorCode.ER_CANT_UPDATE_PRIMARY_KEY: "Attempt to modify a tuple field which is part of index '%s' in space '%s'",
    ErrorCode.ER_UPDATE_INTEGER_OVERFLOW: "Integer overflow when performing '%c' operation on field %s",
    ErrorCode.ER_GUEST_USER_PASSWORD: "Setting password for guest user has no effect",
    ErrorCode.ER_TRANSACTION_CONFLICT: "Transaction has been aborted by conflict",
    ErrorCode.ER_UNSUPPORTED_PRIV: "Unsupported %s privilege '%s'",
    ErrorCode.ER_LOAD_FUNCTION: "Failed to dynamically load function '%s': %s",
    ErrorCode.ER_FUNCTION_LANGUAGE: "Unsupported language '%s' specified for function '%s'",
    ErrorCode.ER_RTREE_RECT: "RTree: %s must be an array with %d (point) or %d (rectangle/box) numeric coordinates",
    ErrorCode.ER_PROC_C: "%s",
    ErrorCode.ER_UNKNOWN_RTREE_INDEX_DISTANCE_TYPE: "Unknown RTREE index distance type %s",
    ErrorCode.ER_PROTOCOL: "%s",
    ErrorCode.ER_UPSERT_UNIQUE_SECONDARY_KEY: "Space %s has a unique secondary index and does not support UPSERT",
    ErrorCode.ER_WRONG_INDEX_RECORD: "Wrong record in _index space: got {%s}, expected {%s}",
    ErrorCode.ER_WRONG_INDEX_PARTS: "Wrong index parts: %s; expected field1 id (number), field1 type (string), ...",
    ErrorCode.ER_WRONG_INDEX_OPTIONS: "Wrong index options (field %d): %s",
    ErrorCode.ER_WRONG_SCHEMA_VERSION: "Wrong schema version, current: %d, in request: %d",
    ErrorCode.ER_MEMTX_MAX_TUPLE_SIZE: "Failed to allocate %d bytes for tuple: tuple is too large. Check 'memtx_max_tuple_size' configuration option.",
    ErrorCode.ER_WRONG_SPACE_OPTIONS: "Wrong space options (field %d): %s",
    ErrorCode.ER_UNSUPPORTED_INDEX_FEATURE: "Index '%s' (%s) of space '%s' (%s) does not support %s",
    ErrorCode.ER_VIEW_IS_RO: "View '%s' is read-only",
    ErrorCode.ER_NO_TRANSACTION: "No active transaction",
    ErrorCode.ER_SYSTEM: "%s",
    ErrorCode.ER_LOADING: "Instance bootstrap hasn't finished yet",
    ErrorCode.ER_CONNECTION_TO_SELF: "Connection to self",
    ErrorCode.ER_KEY_PART_IS_TOO_LONG: "Key part is too long: %d of %d bytes",
    ErrorCode.ER_COMPRESSION: "Compression error: %s",
    ErrorCode.ER_CHECKPOINT_IN_PROGRESS: "Snapshot is already in progress",
    ErrorCode.ER_SUB_STMT_MAX: "Can not execute a nested statement: nesting limit reached",
    ErrorCode.ER_COMMIT_IN_SUB_STMT: "Can not commit transaction in a nested statement",
    ErrorCode.ER_ROLLBACK_IN_SUB_STMT: "Rollback called in a nested statement",
    ErrorCode.ER_DECOMPRESSION: "Decompression error: %s",
    ErrorCode.ER_INVALID_XLOG_TYPE: "Invalid xlog type: expected %s, got %s",
    ErrorCode.ER_ALREADY_RUNNING: "Failed to lock WAL directory %s and hot_standby mode is off",
    ErrorCode.ER_INDEX_FIELD_COUNT_LIMIT: "Indexed field count limit reached: %d indexed fields",
    ErrorCode.ER_LOCAL_INSTANCE_ID_IS_READ_ONLY: "The local instance id %d is read-only",
    ErrorCode.ER_BACKUP_IN_PROGRESS: "Backup is already in progress",
    ErrorCode.ER_READ_VIEW_ABORTED: "The read view is aborted",
    ErrorCode.ER_INVALID_INDEX_FILE: "Invalid INDEX file %s: %s",
    ErrorCode.ER_INVALID_RUN_FILE: "Invalid RUN file: %s",
    ErrorCode.ER_INVALID_VYLOG_FILE: "Invalid VYLOG file: %s",
    ErrorCode.ER_CHECKPOINT_ROLLBACK: "Can't start a checkpoint while in cascading rollback",
    ErrorCode.ER_VY_QUOTA_TIMEOUT: "Timed out waiting for Vinyl memory quota",
    ErrorCode.ER_PARTIAL_KEY: "%s index  does not support selects via a partial key (expected %d parts, got %d). Please Consider changing index type to TREE.",
    ErrorCode.ER_TRUNCATE_SYSTEM_SPACE: "Can't truncate a system space, space '%s'",
    ErrorCode.ER_LOAD_MODULE: "Failed to dynamically load module '%.*s': %s",
    ErrorCode.ER_VINYL_MAX_TUPLE_SIZE: "Failed to allocate %d bytes for tuple: tuple is too large. Check 'vinyl_max_tuple_size' configuration option.",
    ErrorCode.ER_WRONG_DD_VERSION: "Wrong _schema version: expected 'major.minor[.patch]'",
    ErrorCode.ER_WRONG_SPACE_FORMAT: "Wrong space format (field %d): %s",
    ErrorCode.ER_CREATE_SEQUENCE: "Failed to create sequence '%s': %s",
    ErrorCode.ER_ALTER_SEQUENCE: "Can't modify sequence '%s': %s",
    ErrorCode.ER_DROP_SEQUENCE: "Can't drop sequence '%s': %s",
    ErrorCode.ER_NO_SUCH_SEQUENCE: "Sequence '%s' does not exist",
    ErrorCode.ER_SEQUENCE_EXISTS: "Sequence '%s' already exists",
    ErrorCode.ER_SEQUENCE_OVERFLOW: "Sequence '%s' has overflowed",
    ErrorCode.ER_NO_SUCH_INDEX_NAME: "No index '%s' is defined in space '%s'",
    ErrorCode.ER_SPACE_FIELD_IS_DUPLICATE: "Space field '%s' is duplicate",
    ErrorCode.ER_CANT_CREATE_COLLATION: "Failed to initialize collation: %s.",
    ErrorCode.ER_WRONG_COLLATION_OPTIONS: "Wrong collation options (field %d): %s",
    ErrorCode.ER_NULLABLE_PRIMARY: "Primary index of space '%s' can not contain nullable parts",
    ErrorCode.ER_NO_SUCH_FIELD_NAME_IN_SPACE: "Field '%s' was not found in space '%s' format",
    ErrorCode.ER_TRANSACTION_YIELD: "Transaction has been aborted by a fiber yield",
    ErrorCode.ER_NO_SUCH_GROUP: "Replication group '%s' does not exist",
    ErrorCode.ER_SQL_BIND_VALUE: "Bind value for parameter %s is out of range for type %s",
    ErrorCode.ER_SQL_BIND_TYPE: "Bind value type %s for parameter %s is not supported",
    ErrorCode.ER_SQL_BIND_PARAMETER_MAX: "SQL bind parameter limit reached: %d",
    ErrorCode.ER_SQL_EXECUTE: "Failed to execute SQL statement: %s",
    ErrorCode.ER_UPDATE_DECIMAL_OVERFLOW: "Decimal overflow when performing operation '%c' on field %s",
    ErrorCode.ER_SQL_BIND_NOT_FOUND: "Parameter %s was not found in the statement",
    ErrorCode.ER_ACTION_MISMATCH: "Field %s contains %s on conflict action, but %s in index parts",
    ErrorCode.ER_VIEW_MISSING_SQL: "Space declared as a view must have SQL statement",
    ErrorCode.ER_FOREIGN_KEY_CONSTRAINT: "Can not commit transaction: deferred foreign keys violations are not resolved",
    ErrorCode.ER_NO_SUCH_MODULE: "Module '%s' does not exist",
    ErrorCode.ER_NO_SUCH_COLLATION: "Collation '%s' does not exist",
    ErrorCode.ER_CREATE_FK_CONSTRAINT: "Failed to create foreign key constraint '%s': %s",
    ErrorCode.ER_DROP_FK_CONSTRAINT: "Failed to drop foreign key constraint '%s': %s",
    ErrorCode.ER_NO_SUCH_CONSTRAINT: "Constraint '%s' does not exist in space '%s'",
    ErrorCode.ER_CONSTRAINT_EXISTS: "%s constraint '%s' already exists in space '%s'",
    ErrorCode.ER_SQL_TYPE_MISMATCH: "Type mismatch: can not convert %s to %s",
    ErrorCode.ER_ROWID_OVERFLOW: "Rowid is overflowed: too many entries in ephemeral space",
    ErrorCode.ER_DROP_COLLATION: "Can't drop collation %s : %s",
    ErrorCode.ER_ILLEGAL_COLLATION_MIX: "Illegal mix of collations",
    ErrorCode.ER_SQL_NO_SUCH_PRAGMA: "Pragma '%s' does not exist",
    ErrorCode.ER_SQL_CANT_RESOLVE_FIELD: "Can\u2019t resolve field '%s'",
    ErrorCode.ER_INDEX_EXISTS_IN_SPACE: "Index '%s' already exists in space '%s'",
    ErrorCode.ER_INCONSISTENT_TYPES: "Inconsistent types: expected %s got %s",
    ErrorCode.ER_SQL_SYNTAX_WITH_POS: "Syntax error at line %d at or near position %d: %s",
    ErrorCode.ER_SQL_STACK_OVERFLOW: "Failed to parse SQL statement: parser stack limit reached",
    ErrorCode.ER_SQL_SELECT_WILDCARD: "Failed to expand '*' in SELECT statement without FROM clause",
    ErrorCode.ER_SQL_STATEMENT_EMPTY: "Failed to execute an empty SQL statement",
    ErrorCode.ER_SQL_KEYWORD_IS_RESERVED: "At line %d at or near position %d: keyword '%.*s' is reserved. Please use double quotes if '%.*s' is an identifier.",
    ErrorCode.ER_SQL_SYNTAX_NEAR_TOKEN: "Syntax error at line %d near '%.*s'",
    ErrorCode.ER_SQL_UNKNOWN_TOKEN: "At line %d at or near position %d: unrecognized token '%.*s'",
    ErrorCode.ER_SQL_PARSER_GENERIC: "%s",
    ErrorCode.ER_SQL_ANALYZE_ARGUMENT: "ANALYZE statement argument %s is not a base table",
    ErrorCode.ER_SQL_COLUMN_COUNT_MAX: "Failed to create space '%s': space column count %d exceeds the limit (%d)",
    ErrorCode.ER_HEX_LITERAL_MAX: "Hex literal %s%s length %d exceeds the supported limit (%d)",
    ErrorCode.ER_INT_LITERAL_MAX: "Integer literal %s%s exceeds the supported range [-9223372036854775808, 18446744073709551615]",
    ErrorCode.ER_SQL_PARSER_LIMIT: "%s %d exceeds the limit (%d)",
    ErrorCode.ER_INDEX_DEF_UNSUPPORTED: "%s are prohibited in an index definition",
    ErrorCode.ER_CK_DEF_UNSUPPORTED: "%s are prohibited in a ck constraint definition",
    ErrorCode.ER_MULTIKEY_INDEX_MISMATCH: "Field %s is used as multikey in one index and as single key in another",
    ErrorCode.ER_CREATE_CK_CONSTRAINT: "Failed to create check constraint '%s': %s",
    ErrorCode.ER_CK_CONSTRAINT_FAILED: "Check constraint failed '%s': %s",
    ErrorCode.ER_SQL_COLUMN_COUNT: "Unequal number of entries in row expression: left side has %d, but right side - %d",
    ErrorCode.ER_FUNC_INDEX_FUNC: "Failed to build a key for functional index '%s' of space '%s': %s",
    ErrorCode.ER_FUNC_INDEX_FORMAT: "Key format doesn't match one defined in functional index '%s' of space '%s': %s",
    ErrorCode.ER_FUNC_INDEX_PARTS: "Wrong functional index definition: %s",
    ErrorCode.ER_NO_SUCH_FIELD_NAME: "Field '%s' was not found in the tuple",
    ErrorCode.ER_FUNC_WRONG_ARG_COUNT: "Wrong number of arguments is passed to %s(): expected %s, got %d",
    ErrorCode.ER_BOOTSTRAP_READONLY: "Trying to bootstrap a local read-only instance as master",
    ErrorCode.ER_SQL_FUNC_WRONG_RET_COUNT: "SQL expects exactly one argument returned from %s, got %d",
    ErrorCode.ER_FUNC_INVALID_RETURN_TYPE: "Function '%s' returned value of invalid type: expected %s got %s",
    ErrorCode.ER_SQL_PARSER_GENERIC_WITH_POS: "At line %d at or near position %d: %s",
    ErrorCode.ER_REPLICA_NOT_ANON: "Replica '%s' is not anonymous and cannot register.",
    ErrorCode.ER_CANNOT_REGISTER: "Couldn't find an instance to register this replica on.",
    ErrorCode.ER_SESSION_SETTING_INVALID_VALUE: "Session setting %s expected a value of type %s",
    ErrorCode.ER_SQL_PREPARE: "Failed to prepare SQL statement: %s",
    ErrorCode.ER_WRONG_QUERY_ID: "Prepared statement with id %d does not exist",
    ErrorCode.ER_SEQUENCE_NOT_STARTED: "Sequence '%s' is not started",
    ErrorCode.ER_NO_SUCH_SESSION_SETTING: "Session setting %s doesn't exist",
    ErrorCode.ER_UNCOMMITTED_FOREIGN_SYNC_TXNS: "Found uncommitted sync transactions from other instance with id %d",
    ErrorCode.ER_SYNC_MASTER_MISMATCH: "CONFIRM message arrived for an unknown master id %d, expected %d",
    ErrorCode.ER_SYNC_QUORUM_TIMEOUT: "Quorum collection for a synchronous transaction is timed out",
    ErrorCode.ER_SYNC_ROLLBACK: "A rollback for a synchronous transaction is received",
    ErrorCode.ER_TUPLE_METADATA_IS_TOO_BIG: "Can't create tuple: metadata size %d is too big",
}

# One printf-style conversion of the converted templates; `*` takes an extra argument.
_SPEC = re.compile(r"%(%|[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[a-zA-Z])")


def format_message(template: str, args: tuple) -> str:
    """Fill a template the way Tarantool's C/Lua formatting would.

    Extra arguments are ignored and a missing one leaves its conversion as text,
    instead of Python's TypeError, because error paths must never raise anew.
    """
    try:
        return template % args
    except (TypeError, ValueError, OverflowError):
        pass
    out = []
    pos = 0
    rest = list(args)
    for m in _SPEC.finditer(template):
        out.append(template[pos:m.start()])
        pos = m.end()
        spec = m.group(0)
        if spec == "%%":
            out.append("%")
            continue
        need = 1 + (m.group(2) == "*") + (m.group(3) == "*")
        if len(rest) < need:
            out.append(spec)
            continue
        taken, rest = tuple(rest[:need]), rest[need:]
        try:
            out.append(spec % taken)
        except (TypeError, ValueError, OverflowError):
            out.append(str(taken[-1]))
    out.append(template[pos:])
    return "".join(out)


class BoxError(Exception):
    """Base of every error Tarantool would report through box.error.

    `type` is the error class name Tarantool shows (`ClientError`, `TimedOut`, ...);
    `code` is the numeric code sent in IPROTO_ERROR replies.
    """

    type = "ClientError"
    # The C++ class 2.6.0 would have made, when it is not `type`: a CustomError
    # shows its own type name but goes over the wire as "CustomError".
    base_type: str | None = None
    code: int = ErrorCode.ER_UNKNOWN
    # MP_ERROR FIELDS of the error as 2.6.0 sends them: only AccessDeniedError
    # (object_type, object_name, access_type) and CustomError (custom_type) have any.
    fields: dict[str, str] | None = None
    # Set on some errors by whoever knows them and read with getattr and a default:
    # declared for the type checker only (no class value, so an error without them
    # does not seem to have them).
    file: str                       # where it was raised (the IPROTO error stack)
    line: int
    errno: int                      # a SystemError's errno
    system_message: str | None      # strerror(errno), as box.info shows it
    prev: BoxError | None           # the error it was raised after (error stack)
    sync: int                       # a bad packet header's SYNC read before the defect

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = int(code)

    def __str__(self) -> str:
        return self.message

    def log_text(self) -> str:
        """The line 2.6.0's error_log() writes for it (a script's uncaught error, a
        fiber's): an error of the ClientError family by its code's name
        (`ER_ACCESS_DENIED: ...`), a CustomError as 2.6.0 literally prints it (its
        format's `%s` unfilled), any other by its type (`LuajitError: ...`)."""
        if self.base_type == "CustomError":
            name = "Custom type %s"
        elif self.type in ("ClientError", "AccessDeniedError"):
            try:
                name = ErrorCode(self.code).name
            except ValueError:
                name = "ER_UNKNOWN"
        else:
            name = self.type
        return f"{name}: {self.message}"

    def located(self, file: str, line: int) -> BoxError:
        """Give the error the source position 2.6.0 reports for it (the FILE and
        LINE of its IPROTO error entry, `trace` in Lua); returns the error."""
        self.file, self.line = file, line
        return self


# box.stat()'s ERROR counts every ClientError made, as 2.6.0's ClientError
# constructor counts into rmean_error. The list and slot are core/box/stat.py's (a
# layer above this one), which hands them over with `count_client_errors`.
_error_counts: list[int] = [0]
_error_slot = 0


def count_client_errors(counts: list[int], slot: int) -> None:
    global _error_counts, _error_slot
    _error_counts, _error_slot = counts, slot


class ClientError(BoxError):
    """An error identified by its Tarantool code, with the code's message template."""

    def __init__(self, code: int, *args):
        template = MESSAGES.get(int(code), "Unknown error")
        message = format_message(template, args) if args else template
        super().__init__(message, code)
        _error_counts[_error_slot] += 1


def read_only_error() -> ClientError:
    """ER_READONLY as 2.6's box_check_writable makes it: every refusal is written to
    the log (its diag_log: "ER_READONLY: Can't modify data ...") before it is raised
    (with election on, that is every write a follower refuses)."""
    err = ClientError(ErrorCode.ER_READONLY)
    log.error("ER_READONLY: %s", err.message)
    return err


class LaterClientError(ClientError):
    """A ClientError of a code 2.6.0 does not have (2.6.1+: election, promote),
    raised by number with its message: 2.6.0's box.error table stays as it is."""

    def __init__(self, code: int, message: str):
        BoxError.__init__(self, message, code)
        _error_counts[_error_slot] += 1


# 2.6.3's codes (errcode.h) that Spindle raises by number
ER_TOO_EARLY_SUBSCRIBE = 220
ER_QUORUM_WAIT = 222
ER_INTERFERING_PROMOTE = 223
ER_RAFT_DISABLED = 224


class CustomError(ClientError):
    """box.error.new{type = 'MyError', ...}: `type` is the user's name, the wire
    says "CustomError" and carries the name in FIELDS as custom_type (2.6.0)."""

    base_type = "CustomError"

    def __init__(self, custom_type: str, message: str, code: int = 0):
        BoxError.__init__(self, message, code)
        _error_counts[_error_slot] += 1
        # 2.6.0 keeps the name in 64 bytes: a longer one is cut (bytewise)
        raw = custom_type.encode("utf-8", "surrogateescape")
        if len(raw) > 63:
            custom_type = raw[:63].decode("utf-8", "surrogateescape")
        self.type = custom_type
        self.fields = {"custom_type": custom_type}


# Tarantool 2.6.0 sends non-ClientError errors over IPROTO with the code of their
# class (ClientError::get_errcode): a SystemError such as TimedOut goes out as
# ER_SYSTEM, anything else (FiberIsCancelled, Lua errors) as ER_PROC_LUA. Measured
# on the 2.6.0 binary with a raw CALL; Lua's `err.code` is nil for both.
# The base types that are ClientErrors in 2.6.0: their own code goes out (and Lua
# shows it as err.code); the other classes go out with their class's code.
CLIENT_ERROR_TYPES = frozenset({"ClientError", "AccessDeniedError", "CustomError"})
_CLASS_CODES = {"OutOfMemory": ErrorCode.ER_MEMORY_ISSUE, "SystemError": ErrorCode.ER_SYSTEM,
                "SocketError": ErrorCode.ER_SYSTEM, "TimedOut": ErrorCode.ER_SYSTEM,
                "CollationError": ErrorCode.ER_CANT_CREATE_COLLATION}


# Where 2.6.0 raises these ClientErrors on the request path (DML, SELECT, CALL):
# the FILE/LINE of its error reply and Lua's trace, measured on the 2.6.0 binary.
# An error of one of these codes that says nothing else about its place is shown
# there, not at a Python line.
_REQUEST_PATH_LOCATION: dict[int, tuple[str, int]] = {
    ErrorCode.ER_NO_SUCH_SPACE: ("./src/box/schema.h", 84),
    ErrorCode.ER_NO_SUCH_INDEX_ID: ("./src/box/space.h", 335),
    ErrorCode.ER_MORE_THAN_ONE_TUPLE: ("./src/box/space.h", 351),
    ErrorCode.ER_KEY_PART_TYPE: ("./src/box/key_def.h", 532),
    ErrorCode.ER_KEY_PART_COUNT: ("./src/box/index.cc", 116),
    ErrorCode.ER_EXACT_MATCH: ("./src/box/index.cc", 143),
    ErrorCode.ER_FIELD_TYPE: ("./src/box/tuple_format.c", 1193),
    ErrorCode.ER_FIELD_MISSING: ("./src/box/tuple_format.c", 1048),
    ErrorCode.ER_NO_SUCH_FIELD_NO: ("./src/box/xrow_update_field.c", 88),
    ErrorCode.ER_UNKNOWN_UPDATE_OP: ("./src/box/xrow_update_field.c", 665),
    ErrorCode.ER_NO_SUCH_PROC: ("./src/box/lua/call.c", 116),
}


def error_location(err: BoxError) -> tuple[str, int] | None:
    """The FILE/LINE 2.6.0 reports for `err`: the one it was given (located()),
    else the request-path place of its code for a plain ClientError, else None."""
    file, line = getattr(err, "file", None), getattr(err, "line", None)
    if file is not None and line is not None:
        return str(file), int(line)
    if err.type == "ClientError" and err.base_type is None:
        return _REQUEST_PATH_LOCATION.get(int(err.code))
    return None


def iproto_code(err: BoxError) -> int:
    """The code of `err` in an IPROTO error reply, as 2.6.0's
    ClientError::get_errcode() gives it."""
    base_type = err.base_type or err.type
    if base_type in CLIENT_ERROR_TYPES:
        return int(err.code)
    return _CLASS_CODES.get(base_type, ErrorCode.ER_PROC_LUA)


class FiberIsCancelled(BoxError):
    type = "FiberIsCancelled"

    def __init__(self, message: str = "fiber is cancelled"):
        super().__init__(message, ErrorCode.ER_PROC_LUA)


class TimedOut(BoxError):
    type = "TimedOut"

    def __init__(self, message: str = "timed out"):
        super().__init__(message, ErrorCode.ER_SYSTEM)
