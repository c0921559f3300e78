"""Tarantool's `yaml` module: lua-yaml's encode/decode over libyaml (through PyYAML's C
binding, the same library Tarantool links).

encode: the value becomes display data (lua/serialize.py, with the module's options)
and is emitted as lua/render.py emits console output. decode: libyaml's events become
Lua values by lyaml's rules: plain scalars that read as null, booleans (only true,
false, yes, no) or numbers become those; integers beyond 1e14 - 1 become int64/uint64
cdata; tables get array_mt/map_mt; anchors and aliases share (or recurse into) tables.

PyYAML and the renderer are imported by the first encode or decode, not with the
module: they cost ~12 ms of every start, and most instances never use yaml.
"""
from __future__ import annotations

import base64
import re

from ..runtime import LuaRuntime, Multi, read_source
from ..serialize import SerializeError, core, display_table

TAG_PREFIX = "tag:yaml.org,2002:"
_DOUBLE_INT_MAX = 10 ** 14 - 1            # luaL_pushint64 keeps smaller ones as numbers
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -2 ** 63, 2 ** 63 - 1, 2 ** 64 - 1


def _libyaml_loader():
    """PyYAML's libyaml-backed parser, PyYAML imported on first use."""
    import yaml
    loader = getattr(yaml, "CLoader", None)
    if loader is None:   # pragma: no cover - see lua/render.py
        raise ImportError("PyYAML must be built with libyaml (yaml.CLoader) for Spindle")
    return loader


def build(instance):
    runtime = instance.runtime
    codec = YamlCodec(runtime)
    chunk = runtime.load(read_source("modules/yaml.lua"), "@yaml.lua")
    return chunk(core(runtime).table, runtime.bridge(codec.encode, convert_args=False),
                 runtime.bridge(codec.decode, convert_args=False))


# ------------------------------------------------------------ C number parsing

_STRTOLL = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")
_STRTOD = re.compile(
    r"[ \t\n\v\f\r]*[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
    r"(?:[pP][+-]?[0-9]+)?|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|(?:inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?))", re.IGNORECASE)


def _strtod_prefix(text: str) -> tuple[float, int]:
    """C strtod: the value of the longest number at the start, and its length."""
    found = _STRTOD.match(text)
    if found is None:
        return 0.0, 0
    number = found.group(0).strip(" \t\n\v\f\r")
    body = number.lstrip("+-")
    negative = number.startswith("-")
    lowered = body.lower()
    if lowered.startswith("0x"):
        value = float.fromhex(body)
    elif lowered.startswith("inf"):
        value = float("inf")
    elif lowered.startswith("nan"):
        value = float("nan")
    else:
        value = float(body)
    return (-value if negative else value), found.end()


def _strtol_prefix(text: str, low: int, high: int) -> tuple[int, int]:
    found = _STRTOLL.match(text)
    if found is None:
        return 0, 0
    value = int(found.group(2))
    if found.group(1) == "-":
        value = -value
    return max(low, min(high, value)), found.end()


def _yaml_is_bool(text: str) -> bool | None:
    if text in ("false", "no"):
        return False
    if text in ("true", "yes"):
        return True
    return None


def _from_base64(text: str) -> bytes:
    """lyaml's frombase64: skips what is not in the alphabet, drops a partial byte."""
    digits = re.sub(r"[^A-Za-z0-9+/]", "", text)
    digits = digits[: len(digits) - (len(digits) % 4 == 1)]
    return base64.b64decode(digits + "=" * (-len(digits) % 4))


class _LoadError(Exception):
    """lyaml's RETURN_ERRMSG: a message raised as the error."""


class YamlCodec:
    def __init__(self, runtime: LuaRuntime):
        self.runtime = runtime
        lua_core = core(runtime)
        self._null = lua_core.NULL
        self._map_mt = lua_core.map_mt
        self._array_mt = lua_core.array_mt
        self._make_uint64 = lua_core.make_uint64
        self._make_int64 = lua_core.make_int64
        self._setmetatable = runtime.lua.eval("setmetatable")

    # ------------------------------------------------------------- encode

    def encode(self, packed, cfg, handle, prefix) -> str:
        from ..render import yaml_document
        display = display_table(self.runtime, packed, 1, cfg=cfg)[0]
        tag = None
        if prefix is not None:
            tag = (handle.decode(errors="surrogateescape"),
                   prefix.decode(errors="surrogateescape"))
        return yaml_document(display, tag)

    # ------------------------------------------------------------- decode

    def decode(self, document: bytes, cfg, tag_only: bool):
        if isinstance(document, str):
            document = document.encode()
        loader = _libyaml_loader()(document)
        try:
            if tag_only:
                return self._tags(loader)
            return Multi(self._documents(loader, cfg))
        finally:
            loader.dispose()

    def _tags(self, loader) -> Multi:
        import yaml
        try:
            loader.get_event()                      # stream start
            event = loader.get_event()
        except yaml.YAMLError as exc:
            return Multi((None, _error_message(exc, 0)))
        if isinstance(event, yaml.StreamEndEvent) or not getattr(event, "tags", None):
            return Multi((None,))
        if len(event.tags) > 1:
            return Multi((None, "can not decode multiple tags"))
        handle, prefix = next(iter(event.tags.items()))
        return Multi((handle, prefix))

    def _documents(self, loader, cfg) -> list:
        import yaml
        state = _LoadState(self, loader, cfg)
        documents = []
        try:
            state.next()                            # stream start
            while True:
                event = state.next()
                if isinstance(event, yaml.StreamEndEvent):
                    return documents
                state.documents += 1
                state.anchors = {}
                value, found = state.node()
                if not found:
                    raise _LoadError("unexpected END event")
                documents.append(value)
                if not isinstance(state.next(), yaml.DocumentEndEvent):
                    raise _LoadError("expected DOCUMENT_END_EVENT")
        except _LoadError as exc:
            raise SerializeError(str(exc)) from None

    # ------------------------------------------------------------- values

    def integer(self, value: int, signed: bool):
        """luaL_pushint64 / luaL_pushuint64."""
        if -_DOUBLE_INT_MAX <= value <= _DOUBLE_INT_MAX:
            return value
        bits = value % 2 ** 64
        hi, lo = bits >> 32, bits & 0xFFFFFFFF
        return self._make_int64(hi, lo) if signed else self._make_uint64(hi, lo)

    def table(self, kind: str, cfg):
        table = self.runtime.lua.table()
        if cfg[b"decode_save_metatables"]:
            self._setmetatable(table, self._map_mt if kind == "map" else self._array_mt)
        return table


class _LoadState:
    """One yaml.decode call: lyaml's load_node over PyYAML's event stream."""

    def __init__(self, codec: YamlCodec, loader, cfg):
        self.codec = codec
        self.loader = loader
        self.cfg = cfg
        self.documents = 0
        self.anchors: dict[str, object] = {}

    def next(self):
        import yaml
        try:
            return self.loader.get_event()
        except yaml.YAMLError as exc:
            raise _LoadError(_error_message(exc, self.documents)) from None

    def node(self) -> tuple[object, bool]:
        """(value, True), or (None, False) at an end event."""
        import yaml
        event = self.next()
        if isinstance(event, (yaml.DocumentEndEvent, yaml.MappingEndEvent,
                              yaml.SequenceEndEvent)):
            return None, False
        if isinstance(event, yaml.MappingStartEvent):
            return self._mapping(event), True
        if isinstance(event, yaml.SequenceStartEvent):
            return self._sequence(event), True
        if isinstance(event, yaml.ScalarEvent):
            return self._scalar(event), True
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in self.anchors:
                raise _LoadError(f"invalid reference: {event.anchor}")
            return self.anchors[event.anchor], True
        raise _LoadError("invalid event")

    def _mapping(self, event):
        table = self.codec.table("map", self.cfg)
        if event.anchor:
            self.anchors[event.anchor] = table
        while True:
            key, found = self.node()
            if not found:
                return table
            value, found = self.node()
            if not found:
                raise _LoadError("unanticipated END event")
            table[key] = value

    def _sequence(self, event):
        table = self.codec.table("seq", self.cfg)
        if event.anchor:
            self.anchors[event.anchor] = table
        index = 1
        while True:
            value, found = self.node()
            if not found:
                return table
            table[index] = value
            index += 1

    def _scalar(self, event):
        text, tag = event.value, event.tag
        if tag and tag.startswith(TAG_PREFIX):
            kind = tag[len(TAG_PREFIX):]
            if kind == "str":
                return text.encode(errors="surrogatepass")
            if kind == "int":
                return float(_strtol_prefix(text, _INT64_MIN, _INT64_MAX)[0])
            if kind == "float":
                return self._finite(_strtod_prefix(text)[0])
            if kind == "bool":
                return bool(_yaml_is_bool(text))
            if kind == "binary":
                return _from_base64(text)
        if event.style in (None, ""):
            value = self._plain(text)
            if value is not _NOT_PLAIN:
                return value
        raw = text.encode(errors="surrogatepass")
        if event.anchor:
            self.anchors[event.anchor] = raw
        return raw

    def _plain(self, text: str):
        if not text:
            return b""
        if text in ("~", "null"):
            return self.codec._null
        boolean = _yaml_is_bool(text)
        if boolean is not None:
            return boolean
        value, length = _strtol_prefix(text, _INT64_MIN, _INT64_MAX)
        if length == len(text) and value != _INT64_MAX:
            return self.codec.integer(value, signed=True)
        value, length = _strtol_prefix(text, 0, _UINT64_MAX)   # strtoull, positive here
        if length == len(text):
            return self.codec.integer(value, signed=False)
        number, length = _strtod_prefix(text)
        if length == len(text):
            return self._finite(number)
        return _NOT_PLAIN

    def _finite(self, number: float) -> float:
        if not self.cfg[b"decode_invalid_numbers"] and (number != number or
                                                        number in (float("inf"),
                                                                   float("-inf"))):
            raise _LoadError("number must not be NaN or Inf")
        return number


_NOT_PLAIN = object()


def _error_message(exc: Exception, documents: int) -> str:
    """lyaml generate_error_message."""
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or "A problem"
    message = f"{problem} at document: {documents}"
    mark = getattr(exc, "problem_mark", None)
    if mark is not None and (mark.line or mark.column):
        message += f", line: {mark.line + 1}, column: {mark.column + 1}\n"
    else:
        message += "\n"
    context = getattr(exc, "context", None)
    if context:
        context_mark = exc.context_mark
        message += (f"{context} at line: {context_mark.line + 1}, "
                    f"column: {context_mark.column + 1}\n")
    return message
