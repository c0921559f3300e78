"""Console output: the values of one statement as Tarantool 2.6's console prints them.

Values are display data (lua/serialize.py). YAML goes through libyaml (PyYAML's C
emitter, the library Tarantool links) driven event by event the way Tarantool's lyaml
drives it, including its quirks: strings that read as null, booleans or numbers are
single-quoted, strings inside flow collections are single-quoted, strings with an
empty line use the literal style, shared tables get anchors &0 / aliases *0. Lua output
follows src/box/lua/serialize_lua.c, in line and block modes.
"""
from __future__ import annotations

import base64
import collections
from typing import Any

import yaml

from .serialize import (NULL, BareText, FlowDict, FlowList, MapKey, format_double,
                        lua_isnumber, printable)

_Emitter = getattr(yaml, "CDumper", None)
if _Emitter is None:   # pragma: no cover - PyYAML without libyaml cannot match the output
    raise ImportError("PyYAML must be built with libyaml (yaml.CDumper) for Spindle")

BINARY_TAG = "tag:yaml.org,2002:binary"


def render_values(values: list[Any], error: Any, fmt: str = "yaml") -> str:
    """The console's text for a statement's values, or for its error (any display
    value: a message, a table, or serialize.NULL for error(nil))."""
    fmt, _, opts = fmt.partition(",")
    if fmt == "lua":
        block = opts == "block"
        if error is not None:
            return render_lua_value({"error": error}, block) + ";\n"
        return ", ".join(render_lua_value(v, block) for v in values) + ";\n"
    if error is not None:
        values = [{"error": error}]
    if not values:
        return "---\n...\n"
    return yaml_document(list(values))


# ====================================================================== YAML

def yaml_document(value: Any, tag: tuple[str, str] | None = None) -> str:
    """One YAML document as Tarantool's yaml.encode writes it ('--- ...\\n...\\n')."""
    dumper = _YamlDumper(value)
    dumper.document(value, tag)
    return yaml.emit(dumper.events, Dumper=_Emitter, allow_unicode=True, indent=2,
                     width=2, line_break="\n")


_STARTS = ("stream-start", "document-start", "sequence-start", "mapping-start")
_ENDS = ("stream-end", "document-end", "sequence-end", "mapping-end")
_ACCUMULATE = {"document-start": 1, "sequence-start": 2, "mapping-start": 3}
_MATCHING_END = {"sequence-start": "sequence-end", "mapping-start": "mapping-end"}


class _FlowTracker:
    """A model of libyaml's emitter queue and flow level.

    lyaml decides whether to quote a string by asking the emitter, before emitting it,
    whether it is in flow context: emitter.flow_level > 0, or a flow collection start
    still waiting in the event queue. libyaml holds back up to 1-3 events after a
    document/sequence/mapping start, and raises flow_level only when it writes the
    first item of a flow collection, so the answer depends on that buffering; this
    replays it (emitter.c: yaml_emitter_emit, yaml_emitter_need_more_events)."""

    def __init__(self):
        self.queue: collections.deque = collections.deque()
        self.flow_level = 0
        self._opening = False        # a flow collection started, first item not yet out
        self._stack: list[bool] = []

    def feed(self, kind: str, flow: bool = False) -> None:
        self.queue.append((kind, flow))
        while not self._need_more():
            self._process()

    def in_flow(self) -> bool:
        if self.flow_level > 0:
            return True
        return any(flow for kind, flow in self.queue if kind in _MATCHING_END)

    def _need_more(self) -> bool:
        queue = self.queue
        if not queue:
            return True
        accumulate = _ACCUMULATE.get(queue[0][0])
        if accumulate is None:
            return False
        if len(queue) > accumulate:
            return False
        level = 0
        for kind, _ in queue:
            if kind in _STARTS:
                level += 1
            elif kind in _ENDS:
                level -= 1
            if not level:
                return False
        return True

    def _process(self) -> None:
        queue = self.queue
        kind, flow = queue[0]
        if self._opening:
            self.flow_level += 1
            self._opening = False
        if kind in _MATCHING_END:
            empty = len(queue) > 1 and queue[1][0] == _MATCHING_END[kind]
            is_flow = self.flow_level > 0 or flow or empty
            self._stack.append(is_flow)
            self._opening = is_flow
        elif kind in ("sequence-end", "mapping-end"):
            if self._stack.pop():
                self.flow_level -= 1
        queue.popleft()


def _shared_containers(root: Any) -> tuple[set[int], bool]:
    """ids of the lists/dicts reached more than once (lyaml find_references), and
    whether any collection asks for flow style."""
    seen: set[int] = set()
    shared: set[int] = set()
    flow = False

    def visit(value):
        nonlocal flow
        if isinstance(value, MapKey):
            value = value.value
        if not isinstance(value, (list, dict)):
            return
        ident = id(value)
        if ident in seen:
            shared.add(ident)
            return
        seen.add(ident)
        if isinstance(value, dict):
            flow = flow or isinstance(value, FlowDict)
            for key, item in value.items():
                visit(item)
                visit(key)
        else:
            flow = flow or isinstance(value, FlowList)
            for item in value:
                visit(item)

    visit(root)
    return shared, flow


class _YamlDumper:
    def __init__(self, root: Any):
        self.events: list[yaml.Event] = []
        self._shared, has_flow = _shared_containers(root)
        # Without a flow collection asked for, no string is ever in flow context.
        self._tracker = _FlowTracker() if has_flow else None
        self._anchors: dict[int, str] = {}

    def _emit(self, event: yaml.Event, kind: str, flow: bool = False) -> None:
        self.events.append(event)
        if self._tracker is not None:
            self._tracker.feed(kind, flow)

    def document(self, value: Any, tag: tuple[str, str] | None) -> None:
        self._emit(yaml.StreamStartEvent(), "stream-start")
        tags = {tag[0]: tag[1]} if tag else None
        self._emit(yaml.DocumentStartEvent(explicit=True, tags=tags), "document-start")
        self.node(value)
        self._emit(yaml.DocumentEndEvent(explicit=True), "document-end")
        self._emit(yaml.StreamEndEvent(), "stream-end")

    def _anchor(self, value: Any) -> tuple[str | None, bool]:
        """(anchor name, already emitted?) for a container."""
        ident = id(value)
        if ident not in self._shared:
            return None, False
        name = self._anchors.get(ident)
        if name is not None:
            return name, True
        name = str(len(self._anchors))
        self._anchors[ident] = name
        return name, False

    def node(self, value: Any) -> None:
        if isinstance(value, MapKey):
            value = value.value
        if isinstance(value, dict):
            self._mapping(value)
        elif isinstance(value, (list, tuple)):
            self._sequence(value)
        elif value is None or value is NULL:
            self._scalar("null")
        elif value is True or value is False:
            self._scalar("true" if value else "false")
        elif isinstance(value, int):
            self._scalar(str(value))
        elif isinstance(value, float):
            self._scalar(format_double(value))
        elif isinstance(value, BareText):
            self._scalar(str(value))
        elif isinstance(value, str):
            self._string(value)
        elif isinstance(value, (bytes, bytearray)):
            self._binary(bytes(value))
        else:
            self._string(str(value))

    def _scalar(self, text: str, style: str | None = None) -> None:
        self._emit(yaml.ScalarEvent(None, None, (True, True), text, style=style), "scalar")

    def _string(self, text: str) -> None:
        if text in ("~", "null", "true", "false", "yes", "no") or lua_isnumber(text):
            self._scalar(text, "'")
        elif not printable(text):
            self._binary(text.encode("utf-8", "surrogateescape"))
        elif self._tracker is not None and self._tracker.in_flow():
            self._scalar(text, "'")
        elif "\n\n" in text:
            self._scalar(text, "|")
        else:
            self._scalar(text)

    def _binary(self, raw: bytes) -> None:
        encoded = base64.b64encode(raw).decode()
        self._emit(yaml.ScalarEvent(None, BINARY_TAG, (False, False), encoded), "scalar")

    def _sequence(self, items) -> None:
        anchor, done = self._anchor(items)
        if done:
            self._emit(yaml.AliasEvent(anchor), "alias")
            return
        flow = isinstance(items, FlowList)
        self._emit(yaml.SequenceStartEvent(anchor, None, True, flow_style=flow),
                   "sequence-start", flow)
        for item in items:
            self.node(item)
        self._emit(yaml.SequenceEndEvent(), "sequence-end")

    def _mapping(self, mapping: dict) -> None:
        anchor, done = self._anchor(mapping)
        if done:
            self._emit(yaml.AliasEvent(anchor), "alias")
            return
        flow = isinstance(mapping, FlowDict)
        self._emit(yaml.MappingStartEvent(anchor, None, True, flow_style=flow),
                   "mapping-start", flow)
        for key, item in mapping.items():
            self.node(key)
            self.node(item)
        self._emit(yaml.MappingEndEvent(), "mapping-end")


# ======================================================================= Lua

_NODE_ROOT, _NODE_LVALUE, _NODE_RVALUE = 1 << 1, 1 << 3, 1 << 4
_NODE_MAP_KEY, _NODE_MAP_VALUE, _NODE_EMBRACE, _NODE_QUOTE = 1 << 5, 1 << 6, 1 << 7, 1 << 8

_LUA_KEYWORDS = frozenset((
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until",
    "while"))

_ESCAPES = {ord("'"): "\\'", ord('"'): '\\"', 0: "\\0", 7: "\\a", 8: "\\b", 12: "\\f",
            11: "\\v", 13: "\\r", 10: "\\n", 9: "\\t"}


def _lua_escape(raw: bytes) -> str:
    """serialize_lua.c emit_string: C-locale isprint, everything else as \\xNN."""
    out = []
    for byte in raw:
        escape = _ESCAPES.get(byte)
        if escape is not None:
            out.append(escape)
        elif 0x20 <= byte <= 0x7E:
            out.append(chr(byte))
        else:
            out.append("\\x%02x" % byte)
    return "".join(out)


def render_lua_value(value: Any, block: bool = False, indent_lvl: int = 2) -> str:
    """One value in Lua output (`\\set output lua[,block]`), without the ';'."""
    return _LuaDumper(value, block, indent_lvl).run(value)


class _LuaNode:
    __slots__ = ("mask", "index", "is_string", "is_int", "int_value")

    def __init__(self, mask: int, index: int = 0):
        self.mask = mask
        self.index = index
        self.is_string = False
        self.is_int = False
        self.int_value = 0


class _LuaDumper:
    """A port of serialize_lua.c's emitter: values are written with their closing
    separators held back in a suffix that the next write flushes."""

    def __init__(self, root: Any, block: bool, indent_lvl: int):
        self.block = block
        self.indent_lvl = indent_lvl
        self.out: list[str] = []
        self.suffix = ""
        self.noindent = False
        self.prev_mask = 0
        self.shared = _shared_containers(root)[0]
        self.named: set[int] = set()

    def run(self, value: Any) -> str:
        self.dump(_LuaNode(_NODE_ROOT), value, 0)
        return "".join(self.out)

    # ------------------------------------------------------------- writing

    def _emit_value(self, node: _LuaNode, indent: int, text: str) -> None:
        if self.suffix:
            self.out.append(self.suffix)
            self.suffix = ""
        if indent > 0 and self.block and not self.noindent:
            self.out.append(" " * indent)
        if node.mask & _NODE_EMBRACE:
            self.out.append("[")
        if node.mask & _NODE_QUOTE:
            self.out.append('"')
        self.out.append(text)
        if node.mask & _NODE_QUOTE:
            self.out.append('"')
        if node.mask & _NODE_EMBRACE:
            self.out.append("]")

    def _raw(self, indent: int, text: str) -> None:
        self._emit_value(_LuaNode(0), indent, text)

    def _brace_open(self, indent: int) -> int:
        if self.block:
            self._raw(0 if self.noindent else indent, "{\n")
            if self.noindent and self.prev_mask & _NODE_LVALUE:
                self.noindent = False
        else:
            self._raw(indent, "{")
        return indent + self.indent_lvl

    def _brace_close(self, indent: int) -> None:
        self.suffix = ""
        if self.block:
            self._raw(0, "\n")
        self._raw(indent - self.indent_lvl, "}")
        self.suffix = ",\n" if self.block else ", "

    def _emit_node(self, node: _LuaNode, indent: int, text: str | None,
                   key_text: str | None = None) -> None:
        if text is None:
            self.prev_mask = node.mask
            return
        if node.mask & _NODE_MAP_KEY:
            if node.is_int:
                if node.index == node.int_value:
                    self.noindent = False
                    return
                node.mask |= _NODE_EMBRACE
            elif node.is_string:
                self._decorate_key(node, key_text if key_text is not None else text)
        self.prev_mask = node.mask
        self._emit_value(node, indent, text)
        if node.mask & _NODE_RVALUE:
            self.suffix += ",\n" if self.block else ", "
            self.noindent = False
        elif node.mask & _NODE_LVALUE:
            self.suffix += " = "
            self.noindent = True

    @staticmethod
    def _decorate_key(node: _LuaNode, text: str) -> None:
        if text in _LUA_KEYWORDS or not all(c.isascii() and (c.isalnum() or c == "_")
                                            for c in text):
            node.mask |= _NODE_EMBRACE | _NODE_QUOTE
        else:
            node.mask &= ~_NODE_QUOTE

    # ------------------------------------------------------------- walking

    def dump(self, node: _LuaNode, value: Any, indent: int) -> None:
        if isinstance(value, MapKey):
            value = value.value
        text: str | None
        key_text = None
        if value is None:
            text = "nil"
        elif value is NULL:
            text = "box.NULL"
        elif value is True or value is False:
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
            node.is_int, node.int_value = True, value
        elif isinstance(value, float):
            text = format_double(value)
        elif isinstance(value, BareText):
            node.mask |= _NODE_QUOTE
            text = str(value)
        elif isinstance(value, (str, bytes, bytearray)):
            node.mask |= _NODE_QUOTE
            node.is_string = True
            raw = (value.encode("utf-8", "surrogateescape") if isinstance(value, str)
                   else bytes(value))
            if isinstance(value, str) and printable(value):
                key_text = value
                text = _lua_escape(raw)
            else:
                text = key_text = base64.b64encode(raw).decode()
        elif isinstance(value, dict):
            self._table(node, value, indent)
            text = None
        elif isinstance(value, (list, tuple)):
            self._array(node, value, indent)
            text = None
        else:
            node.mask |= _NODE_QUOTE
            node.is_string = True
            key_text = str(value)
            text = _lua_escape(key_text.encode("utf-8", "surrogateescape"))
        self._emit_node(node, indent, text, key_text)

    def _anchored(self, node: _LuaNode, value: Any, indent: int) -> bool:
        """A shared table seen again prints as nil (emit_anchor)."""
        ident = id(value)
        if ident not in self.shared:
            return False
        if ident in self.named:
            self._emit_node(node, indent, "nil")
            return True
        self.named.add(ident)
        return False

    def _array(self, node: _LuaNode, items, indent: int) -> None:
        indent = self._brace_open(indent)
        if not self._anchored(node, items, indent):
            for item in items:
                self.dump(_LuaNode(_NODE_RVALUE), item, indent)
        self._brace_close(indent)

    def _table(self, node: _LuaNode, mapping: dict, indent: int) -> None:
        indent = self._brace_open(indent)
        if not self._anchored(node, mapping, indent):
            for index, (key, item) in enumerate(mapping.items()):
                self.dump(_LuaNode(_NODE_LVALUE | _NODE_MAP_KEY, index), key, indent)
                self.dump(_LuaNode(_NODE_RVALUE | _NODE_MAP_VALUE), item, indent)
        self._brace_close(indent)
