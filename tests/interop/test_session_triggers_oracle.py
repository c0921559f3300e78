"""box.session.on_connect / on_auth / on_disconnect, effective_user and fd, against
2.6.0: the same server script on both, the same clients (the `tarantool` connector),
the same trigger events in the same order (issue 23 item 6)."""
from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import msgpack
import pytest
import tarantool

from tests.integration.box_process import free_port
from tests.integration.cluster import wait_for

from .oracle import SPINDLE, tarantool_binary

SERVER = """
box.cfg{{listen = '127.0.0.1:{port}', log_level = 1}}
box.schema.user.create('u', {{password = 'p'}})
box.schema.user.grant('u', 'super')
box.schema.user.create('bad', {{password = 'p'}})
local function note(...)
    local t = {{}}
    for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end
    local f = io.open('events', 'a')
    f:write(table.concat(t, ' '), '\\n')
    f:close()
end
note('on_connect', type(box.session.on_connect(function()
    note('connect', box.session.id() > 1, box.session.user(), box.session.type(),
         type(box.session.fd()), box.session.fd() >= 0, box.session.peer() ~= nil)
    if box.session.storage.refuse then error('never') end
end)))
box.session.on_auth(function(user, ok)
    note('auth', user, ok, box.session.user(), box.session.effective_user())
    if user == 'bad' then error('no bad users', 0) end
end)
box.session.on_disconnect(function() note('disconnect', box.session.user()) end)
note('counts', #box.session.on_connect(), #box.session.on_auth(),
     #box.session.on_disconnect())
note('bad args', pcall(box.session.on_connect, 'x'))
note('not found', pcall(box.session.on_auth, nil, function() end))
note('admin', box.session.effective_user(), box.session.user(), type(box.session.fd()))
function refuse_guests()
    box.session.on_connect(function()
        if box.session.user() == 'guest' then error('go away', 0) end
    end)
end
note('ready')
"""


def client_events(binary: str, cwd: Path, refused: list) -> list[str]:
    port = free_port()
    (cwd / "server.lua").write_text(SERVER.format(port=port))
    proc = subprocess.Popen([binary, "server.lua"], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    events = cwd / "events"
    try:
        wait_for(lambda: events.exists() and "ready" in events.read_text(), 60, "the server")

        def seen(count: int):
            return wait_for(lambda: len(events.read_text().splitlines()) >= count, 60,
                            f"{count} events")

        def connect(user=None, password=None):
            return tarantool.Connection("127.0.0.1", port, user=user, password=password,
                                        connect_now=True, reconnect_max_attempts=0,
                                        socket_timeout=10)

        expected = len(events.read_text().splitlines())

        def step(count: int) -> None:
            """Each client's events are all in before the next one connects (the
            disconnect trigger runs after the client has gone)."""
            nonlocal expected
            expected += count
            seen(expected)

        good = connect("u", "p")
        assert good.eval("return box.session.user()").data == ["u"]
        good.close()
        step(3)                                # connect, auth, disconnect
        for user, password, words, count in (
                ("u", "wrong", "Incorrect password", 3),
                ("bad", "p", "no bad users", 3),
                ("nosuch", "p", "User 'nosuch' is not found", 2)):   # no on_auth
            with pytest.raises(tarantool.error.DatabaseError, match=words):
                connect(user, password)
            step(count)
        guest = connect()
        guest.ping()
        guest.close()
        step(2)
        admin = connect("u", "p")
        admin.eval("refuse_guests()")
        admin.close()
        step(3)
        # refused: the greeting, then the trigger's error with sync 0, then the end
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            received = b""
            while chunk := sock.recv(4096):
                received += chunk
        assert received.startswith(b"Tarantool 2.6.0 (Binary)")
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        unpacker.feed(received[128:])
        length, header, body = list(unpacker)
        refused.append((header[0x00], header[0x01], body[0x31]))   # code, sync, message
        step(1)                                # the refused one's disconnect
        return events.read_text().splitlines()
    finally:
        proc.kill()
        proc.wait()


def test_session_triggers_as_2_6_0(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "s").mkdir()
    refused: list = []
    real = client_events(tarantool_binary(), tmp_path / "t", refused)
    ours = client_events(SPINDLE, tmp_path / "s", refused)
    assert ours == real
    # ER_PROC_LUA (32), for error() in a trigger as for one in a called function
    assert refused[1] == refused[0] == (0x8000 + 32, 0, "go away")
