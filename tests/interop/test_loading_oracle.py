"""An instance that is recovering answers, as 2.6.0 does: it listens before it loads
and yields while it loads, so a client gets box.info.status 'loading', reads what is
recovered so far, and has its writes refused as read-only; AUTH (and JOIN, SUBSCRIBE)
get ER_LOADING until box.cfg is done. Then everything works as usual.

Both instances start on a data dir written by Tarantool 2.6.0 itself; 2.6.0's holds
many more rows (it recovers ~50 times faster), so that each is still loading when the
probes arrive: the probes run as soon as the port greets, and the test checks that
the first one saw 'loading' (it fails, never skips, if not)."""
from __future__ import annotations

from pathlib import Path

import tarantool

from ..integration.box_process import BoxProcess
from ..integration.cluster import wait_for
from .oracle import SPINDLE, run_script, tarantool_binary

GENERATE = """
box.cfg{log_level = 1}
box.schema.user.grant('guest', 'read,write,execute', 'universe')
box.schema.user.passwd('admin', 'secret')
local s = box.schema.space.create('t')
s:create_index('pk')
for i = 1, %d, 1000 do
    box.begin()
    for j = i, i + 999 do s:insert{j, 'payload', j} end
    box.commit()
end
os.exit(0)
"""
ROWS = {"tarantool": 2_000_000, "spindle": 100_000}
START = "box.cfg{listen = arg[1], log_level = 4}\n"
# box.cfg called by another fiber while the first one loads waits for it (2.6.0's
# `locked`), then reconfigures the running instance
SECOND_CFG = """
local fiber = require('fiber')
local done = fiber.channel(1)
fiber.create(function()
    while true do
        local ok, status = pcall(function() return box.info.status end)
        if ok and status == 'loading' then break end
        fiber.sleep(0)
    end
    box.cfg{log_level = 3}
    done:put({box.info.status, box.cfg.log_level})
end)
box.cfg{log_level = 4}
local seen = done:get(600)
print(seen[1], seen[2], box.cfg.log_level)
os.exit(0)
"""

PROBES = [
    ("eval", "return box.info.status, box.info.ro"),
    ("eval", "return type(box.cfg), box.cfg.listen ~= nil"),
    ("eval", "return box.space._cluster ~= nil, type(box.begin), type(box.schema)"),
    ("eval", "box.space._schema:replace{'probe'}"),
    ("eval", "box.schema.space.create('x')"),
    ("insert", 272),                   # _schema over IPROTO
    ("auth", "admin"),
    ("eval", "return box.session.type(), box.session.user()"),
]


def _probe(conn: tarantool.Connection, port: int, kind: str, arg) -> str:
    try:
        if kind == "eval":
            return repr(conn.eval(arg).data)
        if kind == "insert":
            return repr(conn.insert(arg, ("probe",)).data)
        tarantool.Connection("127.0.0.1", port, user=arg, password="secret").close()
        return "authenticated"
    except tarantool.error.Error as exc:
        args = getattr(exc, "args", ())
        while args and isinstance(args[0], tarantool.error.Error):   # NetworkError(DatabaseError)
            args = args[0].args
        return f"error {args[0]}: {args[1]}" if len(args) >= 2 else f"error {exc}"


def _run(binary: str, kind: str, workdir: Path) -> dict:
    workdir.mkdir()
    generated = run_script(tarantool_binary(), GENERATE % ROWS[kind], workdir,
                           name="generate.lua", timeout=600)
    assert generated.returncode == 0, generated.stderr
    node = BoxProcess(binary, START, workdir)
    try:
        node.wait_ready(120)
        conn = tarantool.Connection("127.0.0.1", node.port, connect_now=True,
                                    socket_timeout=120)
        try:
            loading = [_probe(conn, node.port, *probe) for probe in PROBES]
            wait_for(lambda: conn.eval("return box.info.status").data == ["running"],
                     600, "the end of recovery")
            loaded = [conn.eval("return box.info.ro, box.space.t:len()").data,
                      conn.eval("box.space._schema:replace{'probe'}").data,
                      _probe(conn, node.port, "auth", "admin")]
        finally:
            conn.close()
    finally:
        node.stop()
    second = run_script(binary, SECOND_CFG, workdir, name="second.lua", timeout=600)
    return {"loading": loading, "loaded": loaded, "second box.cfg": second.stdout}


def test_a_recovering_instance_answers_as_2_6_0(tmp_path):
    real = _run(tarantool_binary(), "tarantool", tmp_path / "tarantool")
    ours = _run(SPINDLE, "spindle", tmp_path / "spindle")
    # the probes ran while each was loading (else the comparison says nothing)
    assert real["loading"][0] == "['loading', True]", real
    assert real["loaded"] == [[False, ROWS["tarantool"]], [], "authenticated"]
    assert real["second box.cfg"] == "running\t3\t3\n"
    assert ours == {"loading": real["loading"],
                    "loaded": [[False, ROWS["spindle"]], [], "authenticated"],
                    "second box.cfg": real["second box.cfg"]}
