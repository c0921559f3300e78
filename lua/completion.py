"""Completion candidates read from the live Lua state (runs on the tx thread only).

`complete(runtime, text_before_cursor)` finds the expression being typed at the end
of the text (`box.cf`, `fiber.`, `s:up`, `pri`) and lists the names that can follow:
the fields of the table it names, including those reached through metatable
`__index` tables (so methods of strings, channels and other objects show up), or the
global names and Lua keywords for a bare word.

The walk uses rawget/next only: no metamethod and no user code runs, nothing yields,
so it is safe to call from a hub callback (TxLink.call).
"""
from __future__ import annotations

import re
import weakref
from typing import NamedTuple

import lupa.luajit21 as lupa

from .errors import LuaError

LUA_KEYWORDS = ("and", "break", "do", "else", "elseif", "end", "false", "for",
                "function", "goto", "if", "in", "local", "nil", "not", "or", "repeat",
                "return", "then", "true", "until", "while")

# A dotted path (only the last separator may be ':'), then the partial word.
_TAIL = re.compile(r"(?P<path>(?:[A-Za-z_]\w*\s*\.\s*)*[A-Za-z_]\w*\s*[.:]\s*)?"
                   r"(?P<word>[A-Za-z_]\w*)?$")

MAX_CANDIDATES = 500

_WALKER = """
local path, methods_only, prefix, limit = ...
local rawget, next, type, getmetatable = rawget, next, type, getmetatable

-- t[key] as Lua would find it, following __index tables but never calling anything.
local function lookup(value, key, depth)
    if depth > 8 then return nil end
    if type(value) == 'table' then
        local found = rawget(value, key)
        if found ~= nil then return found end
    end
    local mt = getmetatable(value)
    if type(mt) == 'table' and type(rawget(mt, '__index')) == 'table' then
        return lookup(rawget(mt, '__index'), key, depth + 1)
    end
    return nil
end

local names, seen = {}, {}
local function collect(value, depth, visited)
    if depth > 8 or visited[value] then return end
    if type(value) == 'table' then
        visited[value] = true
        local key, field = next(value)
        while key ~= nil and #names < limit do
            if type(key) == 'string' and not seen[key]
                    and key:match('^[%a_][%w_]*$') and key:sub(1, #prefix) == prefix
                    and (not methods_only or type(field) == 'function') then
                seen[key] = true
                names[#names + 1] = {key, type(field)}
            end
            key, field = next(value, key)
        end
    end
    local mt = getmetatable(value)
    if type(mt) == 'table' and type(rawget(mt, '__index')) == 'table' then
        collect(rawget(mt, '__index'), depth + 1, visited)
    end
end

local target = _G
for i = 1, #path do
    target = lookup(target, path[i], 0)
    if target == nil then return names end
end
collect(target, 0, {})
return names
"""


class Candidate(NamedTuple):
    name: str     # the whole word that replaces the partial one
    kind: str     # Lua type of the value: 'function', 'table', ...


_walkers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _walker(runtime):
    walker = _walkers.get(runtime)
    if walker is None:
        walker = _walkers[runtime] = runtime.load(_WALKER, "=completion")
    return walker


def split_tail(text: str) -> tuple[list[str], str, str] | None:
    """(path names, separator, partial word) of the expression ending `text`, or None
    when there is nothing to complete (empty word, inside a number, after a quote)."""
    if _in_string(text):
        return None
    match = _TAIL.search(text)
    if match is None:
        return None
    start = match.start()
    if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.:"):
        return None   # e.g. `1.5`, `x..y` or a digit-led name: not a field access
    raw_path, word = match.group("path") or "", match.group("word") or ""
    if not raw_path:
        return ([], "", word) if word else None
    compact = re.sub(r"\s+", "", raw_path)
    separator = compact[-1]
    return compact[:-1].split("."), separator, word


def _in_string(text: str) -> bool:
    """A rough check that the cursor sits inside a quoted string on this line."""
    line = text.rsplit("\n", 1)[-1]
    quote = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif line.startswith("--", i):
            return True   # a comment: nothing to complete either
        i += 1
    return quote is not None


def complete(runtime, text_before_cursor: str) -> list[Candidate]:
    """Names that may follow the expression typed at the end of `text_before_cursor`."""
    tail = split_tail(text_before_cursor)
    if tail is None:
        return []
    path, separator, word = tail
    try:
        found = _walker(runtime)(runtime.to_lua(path), separator == ":", word.encode(),
                                 MAX_CANDIDATES)
    except (LuaError, lupa.LuaError):
        return []
    candidates = [Candidate(runtime.to_py(entry[1]), runtime.to_py(entry[2]))
                  for entry in found.values()]
    if not path:
        candidates += [Candidate(k, "keyword") for k in LUA_KEYWORDS
                       if k.startswith(word) and k != word]
    candidates = [c for c in candidates if isinstance(c.name, str)]
    return sorted(set(candidates), key=lambda c: (c.name.startswith("_"), c.name))
