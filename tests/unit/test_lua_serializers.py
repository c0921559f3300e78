"""json, yaml, msgpack and uuid for Lua, Lua values as display data, and the console's
YAML and Lua output — each pinned to what Tarantool 2.6.0 does (facts checked against
the real binary; tests/interop/test_console_output_oracle.py compares live)."""
from __future__ import annotations

import pytest

from spindle.lua.console import ConsoleEngine
from spindle.lua.instance import Instance
from spindle.lua.render import render_lua_value, render_values, yaml_document
from spindle.lua.serialize import (NULL, FlowDict, FlowList, MapKey, SerializeError,
                                   UuidText, display_table, format_double, lua_isnumber,
                                   printable, to_display)


@pytest.fixture(scope="module")
def instance():
    inst = Instance()
    yield inst
    inst.sched.shutdown(timeout=1.0)
    inst.sched.close()


def lua(instance, code, *args):
    """Run a chunk as the main fiber; return its results as plain Python data."""
    def main():
        results = instance.run_chunk(code, "=test", list(args))
        return [instance.runtime.to_py(value) for value in results]
    return instance.sched.run(main)


def lua_error(instance, code) -> str:
    with pytest.raises(Exception) as caught:
        lua(instance, code)
    return getattr(caught.value, "message", str(caught.value))


def display(instance, code, null=None):
    """The display data of a chunk's results."""
    def main():
        fn = instance.runtime.load(code, "=test")
        packer = instance.runtime.load(
            "local f = ... return (function(...) return {...}, select('#', ...) end)(f())")
        packed, count = instance.runtime.call(packer, fn)
        return display_table(instance.runtime, packed, count, null=null)
    return instance.sched.run(main)


def console(instance, *lines) -> list[str]:
    engine = ConsoleEngine(instance)
    return instance.sched.run(lambda: [engine.execute(line).text for line in lines])


# ------------------------------------------------------------------ modules

def test_modules_are_required_not_globals(instance):
    assert lua(instance, "return json, yaml, msgpack, uuid") == [None] * 4
    assert lua(instance, """
        local n = 0
        for _, name in ipairs({'json', 'yaml', 'msgpack', 'uuid'}) do
            if type(require(name)) == 'table' then n = n + 1 end
        end
        return n""") == [4]


def test_serializer_nulls_are_the_one_null(instance):
    assert lua(instance, """
        local null = require('json').NULL
        return rawequal(null, require('json').null), rawequal(null, require('yaml').NULL),
               rawequal(null, require('msgpack').NULL), null == nil, type(null)
    """) == [True, True, True, True, "cdata"]


def test_array_and_map_metatables_are_shared(instance):
    assert lua(instance, """
        local json, yaml, msgpack = require('json'), require('yaml'), require('msgpack')
        return rawequal(json.array_mt, msgpack.array_mt), rawequal(json.map_mt, yaml.map_mt),
               json.array_mt.__serialize, json.map_mt.__serialize
    """) == [True, True, "seq", "map"]


# --------------------------------------------------------------------- json

@pytest.mark.parametrize("expression, text", [
    ("{1, 2, 3}", "[1,2,3]"),
    ("{a = 1.5}", '{"a":1.5}'),
    ("'/x'", '"\\/x"'),
    ("0.1", "0.1"),
    ("1/3", "0.33333333333333"),
    ("100", "100"),
    ("2^63", "9223372036854775808"),
    ("2^64", "1.844674407371e+19"),
    ("-1/0", "-inf"),
    ("0/0", "nan"),
    ("-5LL", "-5"),
    ("12345678901234567890ULL", "12345678901234567890"),
    ("{1, 2, nil, 4}", "[1,2,null,4]"),
    ("{[20] = 1}", '{"20":1}'),
    ("{[5] = 1}", "[null,null,null,null,1]"),
    ("setmetatable({}, {__serialize = 'map'})", "{}"),
    ("{}", "[]"),
    ("setmetatable({1, 2}, {__serialize = function(t) return {x = #t} end})", '{"x":2}'),
    ("'\\1\\31 \"q\" \\\\ \\127 é'", '"\\u0001\\u001f \\"q\\" \\\\ \\u007f é"'),
    ("{box.NULL}", "[null]"),
    ("true", "true"),
])
def test_json_encode(instance, expression, text):
    assert lua(instance, f"return require('json').encode({expression})") == [text]


@pytest.mark.parametrize("code, message", [
    ("json.encode(print)", "unsupported Lua type 'function'"),
    ("json.encode({[1.5] = 1})", "table key must be a number or string"),
    ("json.encode()", "bad argument #1 to '?' (expected 1 or 2 arguments)"),
    ("json.encode(0/0, {encode_invalid_numbers = false})", "number must not be NaN or Inf"),
    ("json.encode({[20] = 1}, {encode_sparse_convert = false})", "excessively sparse array"),
    ("(function() local t = {} t.a = t return json.encode(t) end)()",
     "Too high nest level"),
    ("json.encode(setmetatable({}, {__serialize = 7}))", "invalid __serialize value"),
    ("json.decode('')", "Expected value but found T_END on line 1 at character 1"),
    ("json.decode('[1,]')", "Expected value but found T_ARR_END on line 1 at character 4"),
    ("json.decode('{\"a\" 1}')", "Expected colon but found T_INT on line 1 at character 6"),
    ("json.decode('\"abc')",
     "Expected value but found unexpected end of string on line 1 at character 5"),
    ("json.decode('\"a\\\\qb\"')",
     "Expected value but found invalid escape code on line 1 at character 3"),
    ("json.decode('\\n\\n  [1, tru]')",
     "Expected value but found invalid token on line 3 at character 7"),
    ("json.decode('[1, 2]x')", "Expected the end but found invalid token on line 1 at character 7"),
    ("json.decode('01')", "Expected value but found invalid token on line 1 at character 1"),
    ("json.decode(string.rep('[', 200))",
     "Found too many nested data structures (129) on line 1 at character 129"),
    ("json.decode({})", "bad argument #1 to '?' (string expected, got table)"),
])
def test_json_errors(instance, code, message):
    assert lua_error(instance, f"local json = require('json') return {code}") == message


def test_json_error_has_the_callers_position_unless_tail_called(instance):
    message = lua_error(instance, "local v = require('json').decode('') return v")
    assert message == "test:1: Expected value but found T_END on line 1 at character 1"


def test_json_decode_values(instance):
    assert lua(instance, """
        local json = require('json')
        local t = json.decode('[1, "a", {"b": [true, null]}, -0.5, 1e2]')
        return t, getmetatable(t).__serialize, getmetatable(t[3]).__serialize,
               t[3].b[2] == json.NULL
    """) == [[1, "a", {"b": [True, None]}, -0.5, 100], "seq", "map", True]


def test_json_decode_integers_beyond_1e14_are_cdata(instance):
    assert lua(instance, """
        local json = require('json')
        local small, big = json.decode('99999999999999'), json.decode('100000000000000')
        return type(small), type(big), tostring(json.decode('123456789012345678901234')),
               tostring(json.decode('-9223372036854775808'))
    """) == ["number", "cdata", "18446744073709551615ULL", "-9223372036854775808LL"]


def test_json_decode_unicode_escapes(instance):
    assert lua(instance, r"""return require('json').decode([["\u00e9\ud83d\ude00\/"]])""") \
        == ["é😀/"]


def test_json_cfg_and_new(instance):
    assert lua(instance, """
        local json = require('json')
        local other = json.new()
        other.cfg{encode_use_tostring = true}
        return other.encode({f = 'x'}), json.cfg.encode_use_tostring,
               other.cfg.encode_use_tostring, json.cfg.encode_max_depth
    """) == ['{"f":"x"}', False, True, 128]


# ------------------------------------------------------------------ msgpack

@pytest.mark.parametrize("expression, data", [
    ("1", [1]),
    ("-33", [0xD0, 0xDF]),
    ("0.5", [0xCB, 0x3F, 0xE0, 0, 0, 0, 0, 0, 0]),
    ("300", [0xCD, 1, 44]),
    ("-300", [0xD1, 0xFE, 0xD4]),
    ("70000", [0xCE, 0, 1, 0x11, 0x70]),
    ("5000000000", [0xCF, 0, 0, 0, 1, 0x2A, 0x05, 0xF2, 0]),
    ("{a = 1}", [0x81, 0xA1, 0x61, 1]),
    ("{true, false, box.NULL}", [0x93, 0xC3, 0xC2, 0xC0]),
    ("-2^63", [0xD3, 0x80, 0, 0, 0, 0, 0, 0, 0]),
    ("require('ffi').new('float', 1.5)", [0xCA, 0x3F, 0xC0, 0, 0]),
])
def test_msgpack_encode(instance, expression, data):
    assert lua(instance, f"return {{require('msgpack').encode({expression}):byte(1, -1)}}") \
        == [data]


def test_msgpack_round_trip_and_position(instance):
    assert lua(instance, """
        local msgpack = require('msgpack')
        local data = msgpack.encode({1, 'a', {b = 2.5}, true, msgpack.NULL, 'é'})
        local value, pos = msgpack.decode(data)
        local second, after = msgpack.decode('\\x01\\x02', 2)
        return value, pos == #data + 1, getmetatable(value).__serialize, second, after
    """) == [[1, "a", {"b": 2.5}, True, None, "é"], True, "seq", 2, 3]


def test_msgpack_big_integers(instance):
    assert lua(instance, """
        local msgpack = require('msgpack')
        local function rt(v) return (msgpack.decode(msgpack.encode(v))) end
        return tostring(rt(2^63)), tostring(rt(-2^63)), type(rt(123456789012345)),
               rt(12345678901234), tostring(rt(18446744073709551615ULL))
    """) == ["9223372036854775808ULL", "-9223372036854775808LL", "cdata", 12345678901234,
             "18446744073709551615ULL"]


def test_msgpack_binary_strings_stay_bytes(instance):
    assert lua(instance, """
        local msgpack = require('msgpack')
        local s = msgpack.decode(msgpack.encode('\\255\\0'))
        return #s, s:byte(1), (msgpack.decode('\\xc4\\x03abc'))
    """) == [2, 255, "abc"]


@pytest.mark.parametrize("code, message", [
    ("msgpack.decode('')", "msgpack.decode: invalid MsgPack"),
    ("msgpack.decode('\\x92\\x01')", "msgpack.decode: invalid MsgPack"),
    ("msgpack.decode('\\xd4\\x05\\x01')", "Unsuported MsgPack extension type: 5"),
    ("msgpack.decode('\\x01', 5)", "msgpack.decode: offset is out of bounds"),
    ("msgpack.decode({})", "msgpack.decode: a Lua string or 'char *' expected"),
    ("msgpack.encode()", "msgpack.encode: a Lua object expected"),
    ("msgpack.encode(1, 2)", "msgpack.encode: argument 2 must be of type 'struct ibuf'"),
    ("msgpack.encode(print)", "unsupported Lua type 'function'"),
    ("(function() local t = {} t.a = t return msgpack.encode(t) end)()",
     "Too high nest level - 129"),
])
def test_msgpack_errors(instance, code, message):
    assert lua_error(instance, f"local msgpack = require('msgpack') return {code}") == message


# --------------------------------------------------------------------- uuid

def test_uuid_text_binary_and_equality(instance):
    assert lua(instance, """
        local uuid = require('uuid')
        local u = uuid.fromstr('12345678-9abc-4def-8123-456789abcdef')
        return tostring(u), u:str(), {u:bin():byte(1, 8)}, {u:bin('n'):byte(1, 8)},
               uuid.frombin(u:bin()) == u, uuid.frombin(u:bin('b'), 'b') == u, u == 'x',
               u:isnil(), uuid.NULL:isnil(), type(u), u.time_low
    """) == ["12345678-9abc-4def-8123-456789abcdef", "12345678-9abc-4def-8123-456789abcdef",
             [0x78, 0x56, 0x34, 0x12, 0xBC, 0x9A, 0xEF, 0x4D],
             [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0x4D, 0xEF],
             True, True, False, False, True, "cdata", 0x12345678]


def test_uuid_new_is_version_4(instance):
    assert lua(instance, """
        local uuid = require('uuid')
        local a, b = uuid.new(), uuid()
        return a ~= b, a:str():match('^%x+%-%x+%-4%x+%-[89ab]%x+%-%x+$') ~= nil,
               #uuid.bin(), #uuid.str()
    """) == [True, True, 16, 36]


def test_uuid_fromstr_rules(instance):
    assert lua(instance, """
        local uuid = require('uuid')
        return uuid.fromstr('xyz'), uuid.fromstr('12345678-9abc-4def-f123-456789abcdef'),
               tostring(uuid.fromstr('11111111-2222-3333-4444-55555555555G')),
               tostring(uuid.fromstr('ABCDEF01-2345-6789-8abc-def012345678'))
    """) == [None, None, "11111111-2222-3333-4444-555555555505",
             "abcdef01-2345-6789-8abc-def012345678"]


def test_uuid_msgpack_and_json(instance):
    assert lua(instance, """
        local uuid, msgpack, json = require('uuid'), require('msgpack'), require('json')
        local u = uuid.fromstr('11111111-2222-3333-4444-555555555555')
        local data = msgpack.encode(u)
        return {data:byte(1, 4)}, msgpack.decode(data) == u, json.encode({u})
    """) == [[0xD8, 2, 0x11, 0x11], True, '["11111111-2222-3333-4444-555555555555"]']


# --------------------------------------------------------------------- yaml

@pytest.mark.parametrize("expression, text", [
    ("{a = {1, 2}}", "---\na:\n- 1\n- 2\n...\n"),
    ("'abc'", "--- abc\n...\n"),
    ("nil", "--- null\n...\n"),
    ("{}", "--- []\n...\n"),
    ("'multi\\nline'", "--- 'multi\n\n  line'\n...\n"),
    ("{'a: b', 'x', '12', 'yes'}", "---\n- 'a: b'\n- x\n- '12'\n- 'yes'\n...\n"),
    ("setmetatable({1, {a = 'b'}}, {__serialize = 'seq'})", "--- [1, {'a': 'b'}]\n...\n"),
    ("'\\255'", "--- !!binary /w==\n...\n"),
])
def test_yaml_encode(instance, expression, text):
    assert lua(instance, f"return require('yaml').encode({expression})") == [text]


def test_yaml_encode_tag_and_errors(instance):
    assert lua(instance, """return require('yaml').encode(1,
        {tag_prefix = 'tag:tarantool.io/push,2018', tag_handle = '!push!'})""") == [
        "%TAG !push! tag:tarantool.io/push,2018\n--- 1\n...\n"]
    assert lua_error(instance, "return require('yaml').encode(print)") == \
        "unsupported Lua type 'function'"
    assert lua_error(instance, "return require('yaml').encode()") == \
        "Usage: encode(object, {tag_prefix = <string>, tag_handle = <string>})"


def test_yaml_decode_scalars(instance):
    assert lua(instance, """
        local yaml = require('yaml')
        return yaml.decode('yes'), yaml.decode('No'), yaml.decode('~') == yaml.NULL,
               yaml.decode('0x10'), yaml.decode('.inf'), yaml.decode('1e3'),
               yaml.decode('"5"'), yaml.decode('-7'), yaml.decode('x: !!str 5').x,
               type(yaml.decode('12345678901234567890')), yaml.decode('!!int 9'),
               yaml.decode('')
    """) == [True, "No", True, 16, ".inf", 1000, "5", -7, "5", "cdata", 9]


def test_yaml_decode_documents_anchors_and_binary(instance):
    assert lua(instance, """
        local yaml = require('yaml')
        local a, b = yaml.decode('--- 1\\n--- [2, {x: y}]\\n')
        local r = yaml.decode('&a [1, *a]')
        return a, b, rawequal(r[2], r), yaml.decode('- !!binary /w==')[1]:byte(),
               getmetatable(b).__serialize, getmetatable(b[2]).__serialize
    """) == [1, [2, {"x": "y"}], True, 255, "seq", "map"]


def test_yaml_decode_errors(instance):
    assert lua_error(instance, "return require('yaml').decode('a: [1')") == (
        "did not find expected ',' or ']' at document: 1, line: 2, column: 1\n"
        "while parsing a flow sequence at line: 1, column: 4\n")
    assert lua_error(instance, "return require('yaml').decode('*a')") == "invalid reference: a"
    assert lua_error(instance, "return require('yaml').decode({})") == \
        "Usage: yaml.decode(document, [{tag_only = boolean}])"


def test_yaml_decode_tag_only(instance):
    assert lua(instance, """return require('yaml').decode(
        '%TAG !push! tag:tarantool.io/push,2018\\n--- 1\\n...\\n', {tag_only = true})""") \
        == ["!push!", "tag:tarantool.io/push,2018"]


# ------------------------------------------------------------- display data

def test_display_plain_values(instance):
    assert display(instance, "return 1, 2.5, 'x', true, nil, box.NULL, 2^64, 1e100") == [
        1, 2.5, "x", True, None, None, 18446744073709551616 * 1.0, 1e100]
    values = display(instance, "return 1ULL, -2LL, 18446744073709551615ULL, 2^63")
    assert values == [1, -2, 2 ** 64 - 1, 2 ** 63]
    assert all(type(v) is int for v in values)


def test_display_tables_and_hints(instance):
    values = display(instance, """return {1, 2, {a = 1}}, {1, nil, 3},
        setmetatable({1}, {__serialize = 'seq'}), setmetatable({a = 1}, {__serialize = 'map'}),
        setmetatable({a = 1}, {__serialize = 'array'}), {[20] = 1}""")
    assert values == [[1, 2, {"a": 1}], [1, None, 3], [1], {"a": 1}, [], {20: 1}]
    assert type(values[2]) is FlowList and type(values[3]) is FlowDict
    assert type(values[0]) is list and type(values[5]) is dict


def test_display_serialize_functions_and_errors(instance):
    assert display(instance, """return setmetatable({1, 2}, {__serialize = function(t)
        return {n = #t} end})""") == [{"n": 2}]
    with pytest.raises(SerializeError, match="invalid __serialize value"):
        display(instance, "return setmetatable({}, {__serialize = 7})")


def test_display_shows_other_values_with_tostring(instance):
    values = display(instance, "return print, function() end, coroutine.create(print), "
                               "io.stdout, require('ffi').typeof('int')")
    assert values[0] == "function: builtin#29"
    assert values[1].startswith("function: 0x")
    assert values[2].startswith("thread: 0x")
    assert values[3].startswith("file (0x")
    assert values[4] == "ctype<int>"


def test_display_shared_and_recursive_tables(instance):
    shared = display(instance, "local x = {} return {x, x}")[0]
    assert shared[0] is shared[1]
    recursive = display(instance, "local t = {} t.a = t return t")[0]
    assert recursive["a"] is recursive


def test_display_keys(instance):
    value = display(instance, "return {[{1}] = 'table'}")[0]
    (key, item), = value.items()
    assert isinstance(key, MapKey) and key.value == [1] and item == "table"


def test_display_null_marker_for_lua_output(instance):
    assert display(instance, "return nil, box.NULL, {box.NULL}", null=NULL) == \
        [None, NULL, [NULL]]


def test_display_uuid_and_binary(instance):
    u, raw = display(instance, """return require('uuid').fromstr(
        '11111111-2222-3333-4444-555555555555'), '\\255\\0'""")
    assert type(u) is UuidText and u == "11111111-2222-3333-4444-555555555555"
    assert raw == b"\xff\x00"


def test_to_display_single_value(instance):
    def main():
        table = instance.runtime.load("return {k = {1, 2}}")()
        return to_display(instance.runtime, table)
    assert instance.sched.run(main) == {"k": [1, 2]}


# --------------------------------------------------------------- rendering

def test_string_helpers():
    assert all(lua_isnumber(s) for s in ("12", " 12 ", "0x1A", "1e5", "inf", "-nan", ".5",
                                         "0X1p4", "1."))
    assert not any(lua_isnumber(s) for s in ("", ".", "1e", "0x", "1LL", "12i", "- 5"))
    assert printable("é ü 中文") and printable("tab\t") and not printable("\x85")
    assert not printable("\ufeffx")
    assert format_double(0.1) == "0.1" and format_double(2.0 ** 64) == "1.844674407371e+19"
    assert format_double(float("inf")) == "inf" and format_double(-float("nan")) == "-nan"


@pytest.mark.parametrize("values, text", [
    ([], "---\n...\n"),
    ([None], "---\n- null\n...\n"),
    ([1, "a", True], "---\n- 1\n- a\n- true\n...\n"),
    (["true", "null", "~", "12", " lead", "a: b"],
     "---\n- 'true'\n- 'null'\n- '~'\n- '12'\n- ' lead'\n- 'a: b'\n...\n"),
    (["para\n\nbreak"], "---\n- |-\n  para\n\n  break\n...\n"),
    ([b"\xff"], "---\n- !!binary /w==\n...\n"),
    ([FlowList([1, "a"]), "abc"], "---\n- [1, 'a']\n- abc\n...\n"),
    ([FlowDict({"a": FlowList([1])})], "---\n- {'a': [1]}\n...\n"),
    ([UuidText("11111111-2222-3333-4444-555555555555")],
     "---\n- 11111111-2222-3333-4444-555555555555\n...\n"),
    ([{"a": [1, {"b": None}]}], "---\n- a:\n  - 1\n  - b: null\n...\n"),
])
def test_render_yaml(values, text):
    assert render_values(values, None) == text


def test_render_yaml_anchors():
    shared: list = []
    assert render_values([[shared, shared]], None) == "---\n- - &0 []\n  - *0\n...\n"
    recursive: dict = {}
    recursive["a"] = recursive
    assert render_values([recursive], None) == "---\n- &0\n  a: *0\n...\n"


def test_render_yaml_flow_quoting_follows_libyaml_buffering():
    # Tarantool prints this exact quirk: only strings whose emission libyaml had not
    # yet started inside the flow sequence are quoted.
    assert render_values([FlowList([{"k": "v", "l": "w"}])], None) == \
        "---\n- [{'k': v, l: 'w'}]\n...\n"


def test_render_yaml_wraps_long_lines_at_80_columns():
    text = render_values(["abc " * 30], None)
    assert text.splitlines()[1] == "- 'abc abc abc abc abc abc abc abc abc abc abc abc abc " \
                                   "abc abc abc abc abc abc abc"


def test_render_errors():
    assert render_values([], "boom") == "---\n- error: boom\n...\n"
    assert render_values([], [1, 2]) == "---\n- error:\n  - 1\n  - 2\n...\n"
    assert render_values([], NULL) == "---\n- error: null\n...\n"
    assert render_values([], "x", "lua") == '{error = "x"};\n'
    assert render_values([], NULL, "lua") == "{error = box.NULL};\n"


@pytest.mark.parametrize("value, text", [
    (None, "nil"),
    (NULL, "box.NULL"),
    ([1, 2, {"a": 1}], "{1, 2, {a = 1}}"),
    ([1, None, 3], "{1, nil, 3}"),
    ({0: "z"}, '{"z"}'),
    ({1: "a", 3: "b"}, '{[1] = "a", [3] = "b"}'),
    ("q'uote\"s\n", '"q\\\'uote\\"s\\n"'),
    ("é", '"\\xc3\\xa9"'),
    (b"\xff", '"/w=="'),
    ({"a b": 1, "end": 2, "1a": 3, "": 4}, '{["a b"] = 1, ["end"] = 2, 1a = 3,  = 4}'),
    (float("inf"), "inf"),
    ({}, "{}"),
])
def test_render_lua_line(value, text):
    assert render_lua_value(value) == text


def test_render_lua_block_and_repeats():
    assert render_lua_value([1, {"a": {"b": {}}}], block=True) == \
        "{\n  1,\n  {\n    a = {\n      b = {\n\n      }\n    }\n  }\n}"
    shared: list = []
    assert render_lua_value([shared, shared]) == "{{}, {nil}}"
    assert render_values([shared, shared], None, "lua") == "{}, {};\n"


def test_yaml_document_of_a_scalar():
    assert yaml_document(1) == "--- 1\n...\n"
    assert yaml_document("x", ("!push!", "tag:tarantool.io/push,2018")) == \
        "%TAG !push! tag:tarantool.io/push,2018\n--- x\n...\n"


# ----------------------------------------------------------------- console

def test_console_shows_values_and_errors_as_tarantool(instance):
    assert console(instance, "1, nil", "error({code = 1})", "error(nil)",
                   "setmetatable({}, {__serialize = function() error('no') end})") == [
        "---\n- 1\n- null\n...\n",
        "---\n- error:\n    code: 1\n...\n",
        "---\n- error: null\n...\n",
        "---\n- error: 'console: an exception occurred when formatting the output: "
        "[string \"return\n    setmetatable({}, {__serialize = functi...\"]:1: no'\n...\n",
    ]


def test_console_lua_output(instance):
    assert console(instance, "\\set output lua", "1, 'a', nil, box.NULL", "error('x')",
                   "\\set output lua,block", "{1}", "\\set output yaml") == [
        "true;\n", '1, "a", nil, box.NULL;\n', '{error = "x"};\n', "true;\n",
        "{\n  1\n};\n", "---\n- true\n...\n"]


def test_console_fiber_switch_in_serialize_is_refused(instance):
    text, = console(instance, "setmetatable({}, {__serialize = function() "
                              "require('fiber').sleep(0) return 1 end})")
    assert "fiber yield is not allowed here" in " ".join(text.split())
