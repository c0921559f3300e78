"""Lua syntax highlighting for the console's input line (pygments' LuaLexer)."""
from __future__ import annotations

from prompt_toolkit.lexers import Lexer, PygmentsLexer, SimpleLexer


def lua_lexer() -> Lexer:
    try:
        from pygments.lexers.scripting import LuaLexer
    except ImportError:   # pygments comes with rich; without it, plain text
        return SimpleLexer()
    return PygmentsLexer(LuaLexer)
