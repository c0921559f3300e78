"""Replication URIs: `[user[:password]@]host:port`, a bare port, or `unix/:path`."""
from __future__ import annotations

import re
from dataclasses import dataclass

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)


@dataclass(frozen=True)
class ReplicationUri:
    text: str                 # as configured
    host: str
    port: int | str           # int for TCP, the path for a unix socket
    user: str | None = None
    password: str | None = None

    @property
    def is_unix(self) -> bool:
        return self.host == "unix/"

    def display(self) -> str:
        """The URI as box.info shows it: the password left out (`repl@127.0.0.1:3511`)."""
        where = f"unix/:{self.port}" if self.is_unix else f"{self.host}:{self.port}"
        return f"{self.user}@{where}" if self.user else where


def parse_uri(text: str) -> ReplicationUri:
    """Parse a URI box.cfg already accepted. Raises ValueError on nonsense."""
    raw = str(text).strip()
    rest = _SCHEME.sub("", raw, count=1)
    user = password = None
    if "@" in rest:
        userinfo, rest = rest.rsplit("@", 1)
        user, sep, pw = userinfo.partition(":")
        password = pw if sep else None
    if rest.isdigit():
        return ReplicationUri(raw, "localhost", int(rest), user, password)
    if rest.startswith("unix/:"):
        return ReplicationUri(raw, "unix/", rest[len("unix/:"):], user, password)
    if rest.startswith("/") or rest.startswith("./"):
        return ReplicationUri(raw, "unix/", rest, user, password)
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = tail.lstrip(":")
    else:
        host, _, port = rest.rpartition(":")
    port = port.split("/", 1)[0].split("?", 1)[0]
    if not host or not port.isdigit():
        raise ValueError(f"bad replication URI: {raw!r}")
    return ReplicationUri(raw, host, int(port), user, password)
