"""The Lua runtime and its binding rule (DESIGN §2): coroutine driver, wait-requests,
the forbidden-switch guard, user coroutines, errors both ways, the fiber module."""
from __future__ import annotations

import pytest

from spindle.core.iproto.errors import FiberIsCancelled
from spindle.lua.errors import LuaError
from spindle.lua.instance import Instance


@pytest.fixture
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


def test_values_cross_the_boundary(instance):
    assert lua(instance, "return 1, 2.5, 'x', true, nil, {1, 2}, {a = {b = 1}}, ...",
               "arg") == [1, 2.5, "x", True, None, [1, 2], {"a": {"b": 1}}, "arg"]


def test_big_integers_and_null_round_trip(instance):
    fn_code = "local v = ... ; return v, type(v)"
    assert lua(instance, fn_code, 2 ** 63 + 5) == [2 ** 63 + 5, "cdata"]
    assert lua(instance, fn_code, -(2 ** 62)) == [-(2 ** 62), "cdata"]
    assert lua(instance, "return {1, box_null_placeholder, 3}") == [[1, None, 3]]


def test_fiber_create_runs_immediately_and_join_returns_results(instance):
    assert lua(instance, """
        local fiber = require('fiber')
        local order = {}
        local f = fiber.create(function(x)
            table.insert(order, 'child ' .. x)
            fiber.sleep(0.001)
            return x * 2, 'done'
        end, 21)
        f:set_joinable(true)
        table.insert(order, 'parent')
        local ok, a, b = f:join()
        return order, ok, a, b, f:status()
    """) == [["child 21", "parent"], True, 42, "done", "dead"]


def test_fiber_new_defers_start_and_errors_reach_join(instance):
    ok, message, kind = lua(instance, """
        local fiber = require('fiber')
        local f = fiber.new(function() error('boom') end)
        f:set_joinable(true)
        local ok, err = f:join()
        return ok, tostring(err), err.type
    """)
    assert ok is False and message.endswith("boom") and kind == "LuajitError"


def test_cancel_is_sticky_from_lua(instance):
    assert lua(instance, """
        local fiber = require('fiber')
        local seen = {}
        local f = fiber.create(function()
            for i = 1, 2 do
                local ok, err = pcall(fiber.sleep, 10)
                table.insert(seen, tostring(err))
            end
        end)
        f:cancel()
        fiber.sleep(0)
        local ok, err = pcall(f.cancel, f)
        return seen, f:status(), ok, tostring(err)
    """) == [["fiber is cancelled", "fiber is cancelled"], "dead", False, "the fiber is dead"]


def test_cond_channel_and_storage(instance):
    assert lua(instance, """
        local fiber = require('fiber')
        local cond, ch = fiber.cond(), fiber.channel(1)
        local got = {}
        fiber.create(function() got.cond = cond:wait(5); ch:put({n = 1, f = function() return 7 end}) end)
        cond:signal()
        local v = ch:get(5)
        fiber.self().storage.key = 'mine'
        local other = fiber.create(function() fiber.self().storage.key = 'theirs' end)
        return got.cond, v.n, v.f(), fiber.self().storage.key, ch:get(0.01), ch:count()
    """) == [True, 1, 7, "mine", None, 0]


def test_user_coroutines_keep_working_with_blocking_calls_inside(instance):
    assert lua(instance, """
        local fiber = require('fiber')
        local co = coroutine.create(function(a)
            fiber.sleep(0.001)                -- passes out to the driver and back in
            local b = coroutine.yield(a + 1)
            fiber.sleep(0)
            return b * 10
        end)
        local r1 = {coroutine.resume(co, 1)}
        local r2 = {coroutine.resume(co, 5)}
        local wrapped = coroutine.wrap(function() fiber.yield(); coroutine.yield('w1'); return 'w2' end)
        return r1, r2, coroutine.status(co), wrapped(), wrapped()
    """) == [[True, 2], [True, 50], "dead", "w1", "w2"]


def test_forbidden_switch_inside_a_c_callback_is_a_catchable_error(instance):
    assert lua(instance, """
        local fiber = require('fiber')
        local t = {3, 1, 2}
        local ok, err = pcall(table.sort, t, function(a, b) fiber.sleep(0) return a < b end)
        return ok, tostring(err), fiber.self():status()
    """) == [False, "fiber yield is not allowed here", "running"]


def test_forbidden_switch_in_python_called_from_lua(instance):
    """A Python function reached by a plain Lua->Python call must not block; if it
    tries, the depth guard refuses the switch with a clear Lua error."""
    sched = instance.sched
    instance.runtime.globals[b"blocking_python"] = instance.runtime.bridge(
        lambda: sched.sleep(0))
    ok, message = lua(instance, "local ok, e = pcall(blocking_python) return ok, tostring(e)")
    assert ok is False and "fiber yield is not allowed here" in str(message)


def test_lua_callback_from_python_from_lua_cannot_block(instance):
    """Lua -> Python -> Lua callback: the callback runs on the main state, which cannot
    yield, so a blocking call there errors instead of corrupting lupa."""
    runtime = instance.runtime
    runtime.globals[b"call_back"] = runtime.bridge(lambda fn: runtime.invoke(fn),
                                                   convert_args=False)
    ok, message = lua(instance, """
        local ok, err = pcall(call_back, function() require('fiber').sleep(0) end)
        return ok, tostring(err)
    """)
    assert ok is False and "fiber yield is not allowed here" in str(message)


def test_python_exception_type_survives_a_trip_through_lua(instance):
    def fail():
        raise KeyError("missing")
    instance.runtime.globals[b"fail"] = instance.runtime.bridge(fail)
    with pytest.raises(KeyError) as info:
        lua(instance, "local function f() fail() end\nf()")
    assert "test:1" in info.value.lua_traceback


def test_lua_error_carries_traceback(instance):
    with pytest.raises(LuaError) as info:
        lua(instance, "local function inner() error('deep') end\ninner()")
    assert info.value.message == "test:1: deep"
    assert "in function 'inner'" in info.value.lua_traceback or "test:1" in info.value.lua_traceback
    assert "driver.lua" not in info.value.lua_traceback


def test_cancelled_error_keeps_its_type(instance):
    def main():
        with pytest.raises(FiberIsCancelled):
            instance.sched.current.cancel()
            instance.run_chunk("require('fiber').sleep(1)", "=test")
    instance.sched.run(main)


def test_fiber_info_and_identity(instance):
    info, same, name = lua(instance, """
        local fiber = require('fiber')
        fiber.name('worker')
        return fiber.info(), fiber.self() == fiber.self(), fiber.name()
    """)
    assert same is True and name == "worker"
    assert any(entry["name"] == "worker" for entry in info.values())


def test_os_exit_stops_the_loop(instance):
    lua(instance, "os.exit(7)")
    assert instance.exit_code == 7


def test_package_path_finds_modules_next_to_a_script(instance, tmp_path):
    (tmp_path / "helper.lua").write_text("return {answer = 42}")
    script = tmp_path / "main.lua"
    script.write_text("return require('helper').answer, arg[1]")

    def main():
        return [instance.runtime.to_py(v) for v in instance.run_script(str(script), ["x"])]

    assert instance.sched.run(main) == [42, "x"]
