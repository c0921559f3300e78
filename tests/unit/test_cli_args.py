"""The command line: the plain forms are read without argparse (start-up time), as
argparse reads them; everything else goes to argparse."""
from __future__ import annotations

import pytest

from spindle.shell.cli import parse_args, parse_args_fully, parse_plain_args

PLAIN = [
    [],
    ["s.lua"],
    ["s.lua", "a", "b"],
    ["s.lua", "-e", "x"],
    ["s.lua", "-i"],
    ["s.lua", "--version"],
    ["s.lua", "-h"],
    ["s.lua", "-"],
    ["s.lua", "--e"],
    ["dir/s.lua", "a b", ""],
]
NOT_PLAIN = [
    ["-e", "print(1)"],
    ["-i", "s.lua"],
    ["-e", "x", "-i", "s.lua", "a"],
    ["--version"],
    ["-v"],
    ["-"],
    ["--", "s.lua"],
    ["s.lua", "--", "x"],
    ["s.lua", "a", "--"],
]


@pytest.mark.parametrize("argv", PLAIN)
def test_plain_command_lines_read_as_argparse_reads_them(argv):
    plain = parse_plain_args(argv)
    assert plain is not None
    assert vars(plain) == vars(parse_args_fully(argv))
    assert vars(parse_args(argv)) == vars(plain)


@pytest.mark.parametrize("argv", NOT_PLAIN)
def test_options_and_dashes_go_to_argparse(argv):
    assert parse_plain_args(argv) is None
    assert vars(parse_args(argv)) == vars(parse_args_fully(argv))


def test_argparse_errors_still_exit_with_usage(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["-x"])
    assert exit_info.value.code == 2
    assert "usage: spindle" in capsys.readouterr().err
