"""Tarantool errors: codes, message templates and the ClientError family.

Every refusal Spindle makes is one of these, so a client sees the same code and
text that Tarantool 2.6.0 would send (facts from box_error_codes.txt and errcode.h).
"""
from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    ER_UNKNOWN = 0
    ER_ILLEGAL_PARAMS = 1
    ER_PROC_LUA = 32
    ER_CFG = 59
    ER_TIMEOUT = 78
    ER_PROC_C = 102


# code -> printf-style template, exactly as Tarantool 2.6.0 words it.
MESSAGES: dict[int, str] = {
    ErrorCode.ER_UNKNOWN: "Unknown error",
    ErrorCode.ER_ILLEGAL_PARAMS: "Illegal parameters, %s",
    ErrorCode.ER_PROC_LUA: "%s",
    ErrorCode.ER_CFG: "Incorrect value for option '%s': %s",
    ErrorCode.ER_TIMEOUT: "Timed out",
    ErrorCode.ER_PROC_C: "%s",
}


class BoxError(Exception):
    """Base of every error Tarantool would report through box.error.

    `type` is the error class name Tarantool shows (`ClientError`, `TimedOut`, ...);
    `code` is the numeric code sent in IPROTO_ERROR replies.
    """

    type = "ClientError"
    code: int = ErrorCode.ER_UNKNOWN

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = int(code)

    def __str__(self) -> str:
        return self.message


class ClientError(BoxError):
    """An error identified by its Tarantool code, with the code's message template."""

    def __init__(self, code: int, *args):
        template = MESSAGES.get(int(code), "Unknown error")
        message = template % args if args else template
        super().__init__(message, code)


class FiberIsCancelled(BoxError):
    type = "FiberIsCancelled"

    def __init__(self, message: str = "fiber is cancelled"):
        super().__init__(message, ErrorCode.ER_UNKNOWN)


class TimedOut(BoxError):
    type = "TimedOut"

    def __init__(self, message: str = "timed out"):
        super().__init__(message, ErrorCode.ER_TIMEOUT)
