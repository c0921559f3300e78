"""AUTH of an IPROTO session (Tarantool's box/authentication.cc: authenticate()).

The connection (iproto_server.py) decodes the request and sends the reply; what
lies between — the user lookup, guest's password-less return, the session check,
the scramble against the salt of the greeting and the on_auth triggers — is here,
so the connection's module keeps to reading, dispatching and writing.
"""
from __future__ import annotations

from typing import Any

from spindle.core.iproto.auth import SCRAMBLE_SIZE, check_scramble
from spindle.core.iproto.errors import ErrorCode

from .protocol import Where, client_error
from .requests import Auth
from .session import GUEST, Session, SessionUser

GUEST_ID = GUEST.id
_NAME_IN_ERROR_MAX = 64               # BOX_INVALID_NAME_MAX: user names in errors are cut


def authenticate(executor: Any, session: Session, request: Auth) -> None:
    """2.6.0's authenticate(): lookup, guest shortcut, session check, scramble; on
    success the session's user changes, on failure a ClientError as 2.6.0's."""
    name = request.user_name
    user = executor.find_user(name)
    if user is None:
        shown = name.encode("utf-8", "surrogateescape")[:_NAME_IN_ERROR_MAX]
        raise client_error(Where.USER_NOT_FOUND, ErrorCode.ER_NO_SUCH_USER,
                           shown.decode("utf-8", "surrogateescape"))
    parts = request.tuple
    if parts or user.id != GUEST_ID:     # guest may come back without a password
        _check_password(executor, session, user, parts)
    on_auth = getattr(executor, "on_auth", None)
    if on_auth is not None:
        on_auth(session, user.name, True)
    session.set_user(SessionUser(user.id, user.name))


def _check_password(executor: Any, session: Session, user: Any, parts: list) -> None:
    check_session = getattr(executor, "check_session", None)
    if check_session is not None:
        check_session(session, user)
    if len(parts) < 2:
        raise client_error(Where.AUTH_REQUEST_BODY, ErrorCode.ER_INVALID_MSGPACK,
                           "authentication request body")
    scramble = parts[1]
    if isinstance(scramble, str):
        scramble = scramble.encode("utf-8", "surrogateescape")
    elif not isinstance(scramble, bytes):
        raise client_error(Where.AUTH_SCRAMBLE, ErrorCode.ER_INVALID_MSGPACK,
                           "authentication scramble")
    if len(scramble) != SCRAMBLE_SIZE:
        raise client_error(Where.AUTH_SCRAMBLE_SIZE, ErrorCode.ER_INVALID_MSGPACK,
                           "invalid scramble size")
    if not check_scramble(scramble, session.salt, user.password_hash):
        on_auth = getattr(executor, "on_auth", None)
        if on_auth is not None:
            on_auth(session, user.name, False)
        raise client_error(Where.AUTH_PASSWORD_MISMATCH, ErrorCode.ER_PASSWORD_MISMATCH,
                           user.name)
