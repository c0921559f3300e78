"""The command line as tarantool 2.6.0's getopt ("+hVvie:l:") reads it."""
from __future__ import annotations

import pytest

from spindle.shell.cli import UsageError, parse_args


@pytest.mark.parametrize("argv, script, args", [
    ([], None, []),
    (["s.lua"], "s.lua", []),
    (["s.lua", "a", "b"], "s.lua", ["a", "b"]),
    (["s.lua", "-e", "x"], "s.lua", ["-e", "x"]),          # the script's from here on
    (["s.lua", "--", "x"], "s.lua", ["--", "x"]),
    (["-"], "-", []),
    (["-", "a"], "-", ["a"]),
    (["--", "s.lua", "-i"], "s.lua", ["-i"]),
    (["--", "-e"], "-e", []),
    (["dir/s.lua", "a b", ""], "dir/s.lua", ["a b", ""]),
])
def test_options_stop_at_the_script(argv, script, args):
    options = parse_args(argv)
    assert (options.script, options.args) == (script, args)
    assert options.actions == [] or argv[0].startswith("-")


def test_e_and_l_keep_their_order_and_take_attached_values():
    options = parse_args(["-e", "a()", "-lfio", "-eb()", "-i", "-l", "json", "x.lua", "y"])
    assert options.actions == [("chunk", "a()"), ("library", "fio"), ("chunk", "b()"),
                               ("library", "json")]
    assert options.interactive and options.script == "x.lua" and options.args == ["y"]


def test_clustered_flags():
    options = parse_args(["-ie", "print(7)"])
    assert options.interactive and options.actions == [("chunk", "print(7)")]
    assert parse_args(["-iv"]).version


@pytest.mark.parametrize("argv", [["-v"], ["-V"], ["--version"]])
def test_version(argv):
    assert parse_args(argv).version


@pytest.mark.parametrize("argv", [["-h"], ["--help"]])
def test_help(argv):
    assert parse_args(argv).help


@pytest.mark.parametrize("argv, message", [
    (["-j"], "invalid option -- 'j'"),
    (["-x", "s.lua"], "invalid option -- 'x'"),
    (["-ij"], "invalid option -- 'j'"),
    (["-e"], "option requires an argument -- 'e'"),
    (["-i", "-l"], "option requires an argument -- 'l'"),
    (["--nosuch"], "unrecognized option '--nosuch'"),
])
def test_bad_options_read_as_getopt_says(argv, message):
    with pytest.raises(UsageError) as error:
        parse_args(argv)
    assert str(error.value) == message
