"""`spindle connect URI`: Spindle's console (highlighting, table output, \\watch) on
another instance, Spindle or Tarantool, like `tarantoolctl connect URI`.

URI is a console port (`host:port`, `/path/to.sock`, `unix/:/path`: the text
protocol) or a binary port (`user:password@host:port`: each statement an IPROTO
EVAL of the peer's console evaluator). A local instance without box.cfg hosts the
console; every complete statement typed goes to the peer (lua/modules/console_remote.py).
With standard input not a terminal, the statements read from it are sent in turn.
"""
from __future__ import annotations

import sys

USAGE = """usage: spindle connect URI

Open the console on the instance at URI: a console port (console.listen:
HOST:PORT, /path/to.sock, unix/:/path) or a binary port (box.cfg.listen,
with credentials: USER:PASSWORD@HOST:PORT). Leave with Ctrl-D or \\quit.
"""


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        stream = sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr
        stream.write(USAGE)
        return 0 if stream is sys.stdout else 64
    from .launcher import Launcher
    launcher = Launcher(script=None, script_args=[], actions=[], interactive=True,
                        connect_uri=argv[0])
    return launcher.run()
