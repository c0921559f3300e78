"""A session: one client connection as box sees it (box.session.*).

Ids come from one process-wide counter starting at 1, like box.session.id(), so
other session kinds (the admin console) can draw from the same sequence with
`next_session_id()`.

Requests of one session run concurrently in their own fibers, so what belongs to
a request is kept per fiber: the sync being served (`session.sync`) and the
`su` override stack (`with session.su(user): ...` changes `effective_user` only
for the fiber that entered it, as box.session.su does).
"""
from __future__ import annotations

import contextlib
import itertools
from typing import Any, Callable, Iterator, NamedTuple

from spindle.core.iproto.errors import ClientError, ErrorCode

_session_ids = itertools.count(1)
_SYNC_KEY = "iproto.sync"
SESSION_KEY = "box.session"       # fiber.storage key of the fiber's Session


def current_session(fiber) -> "Session | None":
    """The session a fiber serves (box.session.*), None if it has none yet."""
    return fiber.storage.get(SESSION_KEY) if fiber is not None else None


def next_session_id() -> int:
    return next(_session_ids)


class SessionUser(NamedTuple):
    id: int
    name: str


GUEST = SessionUser(0, "guest")
ADMIN = SessionUser(1, "admin")


class AuthUser(NamedTuple):
    """What an executor's `find_user` returns for AUTH: the user's id and name and
    the stored chap-sha1 hash (base64, as in `_user`), None if it has no password."""

    id: int
    name: str
    password_hash: str | None


def format_peer(address: Any) -> str:
    """box.session.peer() form: '127.0.0.1:3301', '[::1]:3301', 'unix/:path'."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    if isinstance(address, (str, bytes)) and address:
        path = address.decode(errors="replace") if isinstance(address, bytes) else address
        return f"unix/:{path}"
    return ""


class Session:
    type = "binary"

    def __init__(self, sched, peer: str = "", user: SessionUser = GUEST, *,
                 schema_version: Callable[[], int] | None = None,
                 push: Callable[[int, Any], None] | None = None,
                 session_id: int | None = None):
        self.sched = sched
        self.id = next_session_id() if session_id is None else session_id
        self.peer = peer
        self.user = user                 # the authenticated user (AUTH changes it)
        # su frames of users other than admin open in this session's fibers, and
        # whether every fiber of it surely runs as admin: the per-statement access
        # check of box.space's natives reads this one flag for the admin's sessions
        # (a frame a killed fiber never closed only keeps the check on)
        self._other_su_frames = 0
        self.admin_only = user.id == ADMIN.id
        self.salt = b""                  # the greeting salt AUTH is checked against
        self.storage: dict = {}          # box.session.storage
        self.closed = False
        self.fd = -1                     # the connection's socket (box.session.fd())
        self._schema_version = schema_version or (lambda: 0)
        self._push = push
        self._su_fallback: list[SessionUser] = []   # used outside any fiber
        self._su_key = ("iproto.su", self.id)        # fiber.storage key of the su stack

    def __repr__(self) -> str:
        return f"<Session {self.id} {self.peer} user={self.user.name}>"

    # ---------------------------------------------------------------- users

    def _su_stack(self, create: bool = False) -> list[SessionUser] | None:
        fiber = self.sched.current if self.sched is not None else None
        if fiber is None:
            return self._su_fallback
        key = self._su_key
        stack = fiber.storage.get(key)
        if stack is None and create:
            stack = fiber.storage[key] = []
        return stack

    @property
    def effective_user(self) -> SessionUser:
        stack = self._su_stack()
        return stack[-1] if stack else self.user

    @property
    def uid(self) -> int:
        return self.user.id

    @property
    def euid(self) -> int:
        return self.effective_user.id

    def push_user(self, user: SessionUser) -> None:
        stack = self._su_stack(create=True)
        assert stack is not None   # create=True makes one
        stack.append(user)
        if user.id != ADMIN.id:
            self._other_su_frames += 1
            self.admin_only = False

    def pop_user(self) -> SessionUser:
        stack = self._su_stack()
        if not stack:
            raise RuntimeError("su stack is empty")
        user = stack.pop()
        if user.id != ADMIN.id:
            self._other_su_frames -= 1
            self.admin_only = self.user.id == ADMIN.id and not self._other_su_frames
        return user

    @contextlib.contextmanager
    def su(self, user: SessionUser) -> Iterator[SessionUser]:
        """Run a block as `user` (this fiber only)."""
        self.push_user(user)
        try:
            yield user
        finally:
            self.pop_user()

    def set_user(self, user: SessionUser) -> None:
        """Credentials reset after a successful AUTH."""
        self.user = SessionUser(user.id, user.name)
        self.admin_only = user.id == ADMIN.id and not self._other_su_frames

    # ------------------------------------------------------------- requests

    @property
    def sync(self) -> int:
        """Sync of the request this fiber is serving (box.session.sync()), 0 if none."""
        fiber = self.sched.current if self.sched is not None else None
        return fiber.storage.get(_SYNC_KEY, 0) if fiber is not None else 0

    def bind_request(self, fiber, sync: int) -> None:
        """`fiber` serves request `sync` of this session (box.session.* in it)."""
        fiber.storage[_SYNC_KEY] = sync
        fiber.storage[SESSION_KEY] = self

    def bind(self, fiber) -> None:
        fiber.storage[SESSION_KEY] = self

    @property
    def schema_version(self) -> int:
        return self._schema_version()

    def push(self, value: Any, sync: int | None = None) -> None:
        """box.session.push(): an out-of-band CHUNK tagged with the request's sync."""
        if self.closed or self._push is None:
            raise ClientError(ErrorCode.ER_SESSION_CLOSED)
        self._push(self.sync if sync is None else sync, value)
