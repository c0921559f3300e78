-- The Lua half of the coroutine driver (DESIGN §2, "the binding rule").
--
-- Every Lua entry runs in its own coroutine, resumed by a Python driver loop in the
-- entry's fiber. A Lua API that must block does not call Python to block: it yields a
-- wait-request {WAIT, python_callable, args...} out of the coroutine; the driver, back
-- outside Lua, runs the callable in its fiber and resumes the coroutine with
-- (true, results...) or (false, error). WAIT is private to this chunk, so user code
-- cannot forge a request; it is recognised with rawequal.
--
-- Loaded once with (errors) where errors is the table of error helpers built by
-- lua/errors.py; returns the driver's functions to Python.
local errors = ...

local WAIT = setmetatable({}, {__tostring = function() return 'wait-request' end})
local co_create, co_resume, co_yield = coroutine.create, coroutine.resume, coroutine.yield
local co_status, co_isyieldable = coroutine.status, coroutine.isyieldable
local select, rawequal, unpack, type = select, rawequal, unpack, type
local traceback, xpcall = debug.traceback, xpcall

local function pack(...)
    return {n = select('#', ...), ...}
end

-- Error handler of every entry: keep the error value as it is (a box.error stays
-- a box.error) and add the Lua traceback of the place it was raised.
local function on_error(err)
    return {err = err, traceback = traceback('', 2)}
end

local function finish(ok, ...)
    if ok then
        return 'done', ...
    end
    return 'error', ...
end


local function step_result(co, ok, first, ...)
    if not ok then
        -- only reachable if the driver resumed a dead coroutine: a driver bug
        return 'error', {err = first, traceback = ''}
    end
    if co_status(co) == 'dead' then
        return first, ...           -- 'done', results... | 'error', {err, traceback}
    end
    if rawequal(first, WAIT) then
        return 'wait', ...          -- callable, args...
    end
    -- A bare coroutine.yield() at the top of an entry: nothing waits for it, so
    -- resume at once, like a yield that returned no values.
    return 'stray'
end

-- A new entry: a coroutine around fn, run under xpcall so no Lua error ever escapes
-- a resume (lupa would lose the error's type and traceback). Returns the function
-- the Python driver calls for each resume. (The coroutine itself never crosses into
-- Python: lupa would hand it over as a function object.)
local function entry(fn)
    local co = co_create(function(...)
        return finish(xpcall(fn, on_error, ...))
    end)
    return function(...)
        return step_result(co, co_resume(co, ...))
    end
end

local function unwrap(ok, ...)
    if ok then
        return ...
    end
    error((...), 0)
end

-- The one blocking primitive: yield a request and return its answer.
local function wait(callable, ...)
    if not co_isyieldable() then
        error(errors.yield_forbidden(), 2)
    end
    return unwrap(co_yield(WAIT, callable, ...))
end

---------------------------------------------------------------------------------
-- User coroutines. A wait-request yielded inside a coroutine the user created is
-- passed outward to the driver, and the answer passed back in, so fiber.sleep in a
-- user coroutine blocks only its fiber and the user's resume sees nothing of it.

local waiting = setmetatable({}, {__mode = 'k'})   -- coroutines with a request out

local function relay_request(co, ok, first, ...)
    if not (ok and rawequal(first, WAIT) and co_status(co) == 'suspended') then
        return false, ok, first, ...
    end
    if not co_isyieldable() then
        -- resumed from a context that cannot yield: fail the request inside co
        return true, co_resume(co, false, errors.yield_forbidden())
    end
    waiting[co] = true
    local answer = pack(co_yield(WAIT, ...))
    waiting[co] = nil
    return true, co_resume(co, unpack(answer, 1, answer.n))
end

local function resume_loop(co, relayed, ...)
    if relayed then
        return resume_loop(co, relay_request(co, ...))
    end
    return ...
end

local function user_resume(co, ...)
    if waiting[co] then
        return false, 'cannot resume non-suspended coroutine'
    end
    return resume_loop(co, relay_request(co, co_resume(co, ...)))
end

local function user_status(co)
    if waiting[co] then
        return 'normal'
    end
    return co_status(co)
end

local function user_wrap(fn)
    local co = co_create(fn)
    return function(...)
        return unwrap(user_resume(co, ...))
    end
end

coroutine.resume = user_resume
coroutine.status = user_status
coroutine.wrap = user_wrap

-- Run fn(...) to completion on the calling state, which cannot yield: for Lua
-- callbacks Python calls directly (they must not block). Same result tags as entry.
local function protected(fn, ...)
    return finish(xpcall(fn, on_error, ...))
end

return {
    entry = entry,
    protected = protected,
    wait = wait,
    pack = pack,
}
