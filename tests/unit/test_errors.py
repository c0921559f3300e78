"""Error codes and message templates against Tarantool 2.6.0 facts."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from spindle.core.iproto.errors import (
    LUA_HIDDEN_CODES, MESSAGES, BoxError, ClientError, ErrorCode, FiberIsCancelled,
    TimedOut, format_message)

FIXTURE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "tarantool-2.6" / "box_error_codes.txt"


def _fixture_codes() -> dict[int, str]:
    codes = {}
    for line in FIXTURE.read_text().splitlines():
        if line.strip():
            num, name = line.split()
            codes[int(num)] = name
    return codes


def test_codes_match_fixture_exactly():
    fixture = _fixture_codes()
    ours = {int(c): c.name[len("ER_"):] for c in ErrorCode if c not in LUA_HIDDEN_CODES}
    assert ours == fixture


def test_hidden_codes_are_the_reserved_ones():
    # The fixture was taken from Lua's box.error, which drops names with RESERVED.
    assert {int(c) for c in LUA_HIDDEN_CODES} == {67, 183}
    assert all("RESERVED" in c.name for c in LUA_HIDDEN_CODES)
    assert all("RESERVED" not in name for name in _fixture_codes().values())


def test_codes_are_dense_and_every_code_has_a_message():
    assert [int(c) for c in ErrorCode] == list(range(len(ErrorCode)))
    assert set(MESSAGES) == set(ErrorCode)
    assert len(ErrorCode) == 219


def test_templates_use_only_python_conversions():
    for code, template in MESSAGES.items():
        for spec in re.findall(r"%[^a-zA-Z%]*[a-zA-Z%]", template):
            assert spec in ("%s", "%d", "%c", "%.*s"), (code, template)


@pytest.mark.parametrize("code, template", [
    (ErrorCode.ER_UNKNOWN, "Unknown error"),
    (ErrorCode.ER_ILLEGAL_PARAMS, "Illegal parameters, %s"),
    (ErrorCode.ER_READONLY, "Can't modify data because this instance is in read-only mode."),
    (ErrorCode.ER_RELOAD_CFG, "Can't set option '%s' dynamically"),
    (ErrorCode.ER_CFG, "Incorrect value for option '%s': %s"),
    (ErrorCode.ER_TIMEOUT, "Timeout exceeded"),
    (ErrorCode.ER_INVALID_ORDER,
     "Invalid LSN order for instance %d: previous LSN = %d, new lsn = %d"),
    (ErrorCode.ER_WRONG_SCHEMA_VERSION, "Wrong schema version, current: %d, in request: %d"),
    (ErrorCode.ER_NO_SUCH_PROC, "Procedure '%.*s' is not defined"),
    (ErrorCode.ER_SYNC_QUORUM_TIMEOUT, "Quorum collection for a synchronous transaction is timed out"),
    (ErrorCode.ER_TUPLE_METADATA_IS_TOO_BIG, "Can't create tuple: metadata size %d is too big"),
])
def test_known_templates(code, template):
    assert MESSAGES[code] == template


def test_some_names():
    assert ErrorCode.ER_CFG == 59
    assert ErrorCode.ER_LOADING == 116
    assert ErrorCode.ER_SYNC_ROLLBACK == 217
    assert ErrorCode.ER_REPLICA_ID_IS_RESERVED == 67


def test_client_error_formats_arguments():
    err = ClientError(ErrorCode.ER_CFG, "listen", "expected host:service or /unix.socket")
    assert str(err) == "Incorrect value for option 'listen': expected host:service or /unix.socket"
    assert err.code == 59 and err.type == "ClientError"
    assert str(ClientError(ErrorCode.ER_INVALID_ORDER, 1, 5, 3)) == \
        "Invalid LSN order for instance 1: previous LSN = 5, new lsn = 3"
    assert str(ClientError(ErrorCode.ER_NO_SUCH_PROC, 3, "abcdef")) == \
        "Procedure 'abc' is not defined"
    assert str(ClientError(ErrorCode.ER_TIMEOUT)) == "Timeout exceeded"


def test_format_is_tolerant():
    # Extra arguments are dropped, a missing one leaves the conversion, a wrong
    # type is printed as text: building an error must never raise.
    assert format_message("Illegal parameters, %s", ("x", "y")) == "Illegal parameters, x"
    assert format_message("a %s b %s", ("x",)) == "a x b %s"
    assert format_message("n=%d", ("seven",)) == "n=seven"
    assert format_message("100%% %s", ("x",)) == "100% x"


def test_error_classes():
    assert isinstance(ClientError(0), BoxError)
    assert TimedOut().message == "timed out" and TimedOut().type == "TimedOut"
    assert TimedOut().code == ErrorCode.ER_SYSTEM
    assert FiberIsCancelled().message == "fiber is cancelled"
    assert FiberIsCancelled().code == ErrorCode.ER_PROC_LUA
