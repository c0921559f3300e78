"""The interactive console on a real pty: output, editing keys, completion, history."""
from __future__ import annotations

import re



def test_statements_print_yaml_documents(spawn_console):
    console = spawn_console()
    assert console.run("1 + 1") == "- 2\n"
    assert console.run("x = {a = 1, b = 'two'}") == ""
    body = console.run("x")
    assert "a: 1" in body and "b: two" in body
    assert console.run("'hello', nil, true") == "- hello\n- null\n- true\n"


def test_multi_line_function_definition(spawn_console):
    console = spawn_console()
    console.send("function double(x)\r")
    console.expect_literal(console.CONTINUATION)
    console.send("    return x * 2\r")
    console.expect_literal(console.CONTINUATION)
    console.send("end\r")
    console.expect(r"---\r?\n\.\.\.\r?\n")
    console.prompt()
    assert console.run("double(21)") == "- 42\n"


def test_error_is_a_yaml_error_document(spawn_console):
    console = spawn_console()
    assert "- error:" in console.run("error('bad' .. ' thing')")
    assert "bad thing" in console.text
    assert console.run("2 + 2") == "- 4\n"   # the console lives on


def test_tab_completes_module_fields(spawn_console):
    console = spawn_console()
    console.run("fiber = require('fiber')")
    console.send("fiber.")
    console.send("\t")
    console.expect("create")            # the menu lists the module's functions
    console.send("\x03")                # drop the line
    console.prompt()
    console.run("s = 'abc'")
    console.send("s:upp")
    console.expect("upp")
    console.send("\t")                  # a single candidate is inserted: s:upper
    console.expect("er")                # (only the new letters are redrawn)
    console.send("()\r")
    console.expect(r"---\r?\n- ABC\r?\n\.\.\.")
    console.prompt()


def test_ctrl_c_cancels_the_running_statement(spawn_console):
    console = spawn_console()
    console.send("print('spin' .. 'ning') while true do require('fiber').sleep(0.01) end\r")
    console.expect_literal("spinning")  # the statement runs: the terminal is cooked
    console.send("\x03")
    console.expect(r"- error: fiber is cancelled")
    console.prompt()
    assert console.run("3 * 3") == "- 9\n"


def test_ctrl_c_while_editing_drops_the_line(spawn_console):
    console = spawn_console()
    console.send("this is not lua")
    console.expect("lua")
    console.send("\x03")
    console.prompt()
    assert console.run("5 + 5") == "- 10\n"


def test_ctrl_d_exits_with_status_0(spawn_console):
    console = spawn_console()
    console.run("1")
    console.send("\x04")
    assert console.wait_exit() == 0


def test_quit_command_exits(spawn_console):
    console = spawn_console()
    console.send("\\quit\r")
    assert console.wait_exit() == 0


def test_set_output_table(spawn_console):
    console = spawn_console()
    assert console.run("\\set output table") == "- true\n"
    console.send("{{1, 'a'}, {2, 'b'}}\r")
    console.expect(r"col1\s*│\s*col2")
    console.expect(r"│ 2\s*│ b")
    console.prompt()
    console.send("{{id = 1, name = 'x'}}\r")
    console.expect(r"id\s*│\s*name|name\s*│\s*id")
    console.prompt()
    console.send("1, 'x'\r")                     # several values: one table
    console.expect(r"col1.*│ 1\s*│.*│ x\s*│")
    console.prompt()
    assert console.run("{}") == "- []\n"        # nothing to draw: YAML
    assert console.run("\\set output yaml") == "- true\n"
    assert console.run("{{1, 'a'}}") == "- - - 1\n    - a\n"


def test_table_output_takes_names_from_the_space_format(spawn_console, tmp_path):
    console = spawn_console()
    console.run(f"box.cfg{{log_level = 1, work_dir = '{tmp_path}'}}")
    console.run("s = box.schema.space.create('people', {format = {{'id', 'unsigned'}, "
                "{'name', 'string'}, {'age', 'unsigned'}}}) s:create_index('pk')")
    console.run("s:insert{1, 'Ann', 30} s:insert{2, 'Bob', 41, 'extra'}")
    assert console.run("\\set output table") == "- true\n"
    console.send("s:get(1)\r")                   # a single tuple is a table too
    console.expect(r"│ id\s*│ name\s*│ age\s*│.*│ 1\s*│ Ann\s*│ 30\s*│")
    console.prompt()
    console.send("s:select()\r")
    console.expect(r"│ id\s*│ name\s*│ age\s*│ col4\s*│.*│ 2\s*│ Bob\s*│ 41\s*│ extra")
    console.prompt()
    console.send("s:get(1), s:get(2)\r")         # two values, one table
    console.expect(r"│ id\s*│ name.*│ 1\s*│ Ann.*│ 2\s*│ Bob[^┌]*└")
    console.prompt()
    console.send("box.space._space:get(s.id)\r")   # a system space's format (its
    console.expect(r"│ id\s*│ 512\s*│.*│ owner\s*│ 1 .*│ name\s*│ people\s*│"   # format
                   r".*│ format\s*│ \{\{name = \"id\"")                # folds it)
    console.prompt()
    console.send("box.space._index:select(s.id)\r")
    console.expect(r"│ id\s*│ iid\s*│ name\s*│ type\s*│ opts\s*│ parts")
    console.prompt()


def test_backslash_x_switches_formats_as_tt_connect(spawn_console):
    console = spawn_console()
    console.send("\\x\r")                    # yaml -> lua: said in the new format
    console.expect_literal('{output = "lua"};')
    console.prompt()
    console.send("\\x\r")                    # lua -> table
    console.expect(r"- output: table")
    console.prompt()
    console.send("{{1, 'a'}, {2, 'b'}}\r")
    console.expect(r"col1\s*│\s*col2.*│ 2\s*│ b")
    console.prompt()
    assert console.run("\\x") == "- output: ttable\n"
    console.send("{{1, 'a'}, {2, 'b'}}\r")       # vertical: a line per field
    console.expect(r"│ col1 │ 1 │ 2 │\r?\n│ col2 │ a │ b │")
    console.prompt()
    assert console.run("\\x") == "- output: yaml\n"
    assert console.run("\\xt") == "- output: table\n"
    assert console.run("\\xy") == "- output: yaml\n"


def test_a_table_wider_than_the_terminal_folds_vertically(spawn_console):
    console = spawn_console()
    assert console.run("\\set output table") == "- true\n"
    console.send("{{1, string.rep('wide ', 20), string.rep('wider ', 20)}}\r")
    console.expect(r"│ col1 │ 1 +│\r?\n│ col2 │ wide wide")
    console.prompt()


def test_set_language(spawn_console):
    console = spawn_console()
    assert console.run("\\set language lua") == "- true\n"
    assert "SQL is not supported" in console.run("\\set language sql")


def test_help(spawn_console):
    console = spawn_console()
    console.send("\\help\r")
    console.expect_literal("Available backslash commands")
    console.expect_literal("\\quit")
    console.prompt()


def test_background_fiber_output_keeps_the_line(spawn_console):
    console = spawn_console()
    console.run("fiber = require('fiber') log = require('log')")
    console.run("fiber.create(function() fiber.sleep(1) print('tick ' .. 'from fiber') "
                "log.info('log ' .. 'from fiber') end)")
    console.send("12")                     # half-typed when the fiber speaks
    console.expect_literal("tick from fiber")
    console.expect_literal("log from fiber")   # (before box.cfg: the boot logger's plain line)
    console.expect(r"spindle> 12")         # the prompt is redrawn with the line intact
    console.send("3\r")
    console.expect(r"---\r?\n- 123\r?\n\.\.\.")
    console.prompt()


def test_history_persists_between_runs(spawn_console, console_env):
    first = spawn_console()
    first.run("'hist' .. 'ory ok'")
    first.send("\x04")
    assert first.wait_exit() == 0
    with open(console_env["SPINDLE_HISTORY"]) as history:
        assert "+'hist' .. 'ory ok'" in history.read()

    second = spawn_console()
    second.send("\x1b[A")                    # Up: the last line of the first run
    second.expect("ory ok")
    second.send("\r")
    second.expect(r"- history ok")
    second.prompt()
    second.send("\x12")                      # Ctrl-R: reverse search
    second.expect("I-search backward")
    second.send("hist")
    second.expect("hist' ..")
    second.send("\r")                        # take the match into the line
    second.expect("spindle>")
    second.send("\r")
    second.expect(r"- history ok")
    second.prompt()


def test_interactive_after_script(spawn_console, tmp_path):
    script = tmp_path / "init.lua"
    script.write_text("greeting = 'set by ' .. 'the script'\n")
    console = spawn_console("-i", str(script))
    assert console.run("greeting") == "- set by the script\n"
    assert re.search(re.escape(console.PROMPT), console.text)


def test_ctrl_c_storm_neither_crashes_nor_hangs(spawn_console):
    console = spawn_console()
    console.send("while true do require('fiber').sleep(0.001) end\r")
    console.expect_literal("while true")
    console.send("\x03" * 30)            # a storm while the statement runs
    console.expect(r"- error: fiber is cancelled")
    console.prompt()
    console.send("\x03" * 30)            # and while the prompt is idle
    console.prompt()
    assert console.run("'still ' .. 'here'") == "- still here\n"


def test_error_in_a_background_fiber_is_logged_and_the_instance_lives(spawn_console):
    console = spawn_console()
    console.run("require('fiber').create(function() local t = nil; return t.field end)")
    # logged as 2.6.0 logs it: its type and message, no Lua traceback
    assert "LuajitError: [string" in console.text and "attempt to index local 't'" in console.text
    assert "stack traceback" not in console.text
    assert console.run("1") == "- 1\n"


def test_ctrl_d_typed_ahead_while_a_statement_runs_ends_the_console(spawn_console):
    console = spawn_console()
    console.send("require('fiber').sleep(1) return 'slept'\r")
    console.expect_literal("return 'slept'")   # accepted: the statement runs
    console.send("\x04")                        # typed before the reply is out
    console.expect(r"- slept")
    assert console.wait_exit() == 0


def test_keys_typed_ahead_reach_the_next_prompt(spawn_console):
    console = spawn_console()
    console.send("require('fiber').sleep(1) return 'first'\r")
    console.expect_literal("return 'first'")
    console.send("'sec' .. 'ond'\r")            # typed while the first one runs
    console.expect(r"- first")
    console.expect(r"- second")
    console.prompt()


def test_a_wrapped_long_line_has_no_continuation_prompt(spawn_console):
    """Copying a soft-wrapped line from the screen copies the line: the continuation
    prompt is drawn only on the real new lines of a multi-line chunk."""
    console = spawn_console()
    start = console.pos
    console.send("'" + "w" * 150 + "' .. 'end'")   # 120 columns: it wraps once
    console.expect_literal("'end'")
    assert console.CONTINUATION not in console.text[start:]
    console.send("\r")
    # what stays on the screen is the line in one piece, for the terminal to wrap
    console.expect_literal("spindle> '" + "w" * 150 + "' .. 'end'\r\n")
    console.expect(r"- w+end")
    console.prompt()
    console.send("function f()\r")                  # a real new line keeps it
    console.expect_literal(console.CONTINUATION)
    console.send("end\r")
    console.prompt()


def test_backslash_x_on_a_connected_peer(spawn_console):
    """`spindle connect`: \\x moves the peer between yaml and lua, and this console
    between the tables it draws from the peer's YAML."""
    from ..interop.console_harness import ConsoleNode
    from .conftest import SPINDLE
    node = ConsoleNode(SPINDLE)
    try:
        console = spawn_console("connect", f"127.0.0.1:{node.tcp}", cwd=str(node.dir),
                                wait_prompt=False)
        peer_prompt = f"\x01127.0.0.1:{node.tcp}>"
        console.expect_literal(peer_prompt)
        for line, shown in (("\\x", "true;"),                       # the peer: lua
                            ("{1, 'a'}", '{1, "a"};'),
                            ("\\x", "- true"),                      # here: table
                            ("{{1, 'a'}, {2, 'b'}}", "│ 2    │ b    │"),
                            ("\\x", "- true"),                      # here: ttable
                            ("{{1, 'a'}, {2, 'b'}}", "│ col1 │ 1 │ 2 │"),
                            ("\\x", "- true"),                      # the peer: yaml
                            ("{1, 'a'}", "- - 1")):
            console.send(line + "\r")
            console.expect_literal(shown)
            console.expect_literal(peer_prompt)
    finally:
        node.stop()
