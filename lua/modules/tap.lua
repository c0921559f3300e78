-- Tarantool's `tap` module: tests printing the Test Anything Protocol text 2.6.0 prints,
-- written for Spindle from that output (TAP version 13, "ok - name", subtests indented
-- by four spaces, a YAML block after a failure).
--
-- The YAML block after a failed check lists the same keys as 2.6.0's, in the order
-- 2.6.0 prints them for that check (2.6.0 prints a Lua table in its hash order, which
-- is fixed for a given set of keys; Spindle's LuaJIT seeds its hashes at random, so the
-- orders are written down here).
local yaml = ...
local type, tostring, select, error, pcall = type, tostring, select, error, pcall
local getmetatable, setmetatable, pairs, ipairs, next = getmetatable, setmetatable, pairs,
    ipairs, next
local string_format, string_rep, string_find = string.format, string.rep, string.find
local io_write = io.write
local getinfo = debug.getinfo

local SOURCE = '@builtin/tap.lua'
-- the lines 2.6.0's trace shows for its own frames: the subtest runner calling the
-- subtest's function, and the same method reporting the subtest's result
local RUNNER_LINE, RESULT_LINE = 218, 245

-- key orders of the YAML block, by the sorted set of keys a check reports
local ORDERS = {
    ['filename line trace'] = {'filename', 'line', 'trace'},
    ['expected filename got line trace'] = {'filename', 'trace', 'line', 'expected', 'got'},
    ['filename got line trace'] = {'filename', 'line', 'got', 'trace'},
    ['expected filename line trace'] = {'filename', 'line', 'expected', 'trace'},
    ['filename got line trace unexpected'] = {'unexpected', 'trace', 'line', 'filename', 'got'},
    ['expected filename got line path strict trace'] =
        {'path', 'line', 'strict', 'filename', 'trace', 'expected', 'got'},
    ['expected filename got line strict trace'] =
        {'filename', 'trace', 'line', 'strict', 'expected', 'got'},
    ['filename got line path strict trace'] =
        {'path', 'trace', 'line', 'filename', 'strict', 'got'},
    ['expected filename line path strict trace'] =
        {'path', 'trace', 'line', 'filename', 'strict', 'expected'},
    ['expected filename line strict trace'] = {'filename', 'strict', 'line', 'expected', 'trace'},
    ['filename got line strict trace'] = {'filename', 'strict', 'line', 'got', 'trace'},
    ['failed filename line planned trace'] = {'filename', 'trace', 'planned', 'failed', 'line'},
    ['filename line planned run trace'] = {'filename', 'trace', 'planned', 'line', 'run'},
}
local FRAME_KEYS = {'line', 'source', 'filename', 'what', 'namewhat', 'name', 'src'}

local test_mt = {}
local test_object_mt = {__index = test_mt}

local function indent(test)
    return string_rep(' ', 4 * test.level)
end

-- "key: value" as the yaml module writes it, without the document markers
local function yaml_pair(key, value)
    local text = yaml.encode({[key] = value})
    return (text:gsub('^%-%-%-\n', ''):gsub('%.%.%.\n$', ''))
end

local function frame_of(info)
    local source = info.source or '?'
    return {
        line = info.linedefined or 0,
        source = source,
        filename = source:sub(1, 1) == '@' and source:sub(2) or 'eval',
        what = info.what,
        namewhat = info.namewhat,
        name = info.name,
        src = info.short_src,
    }
end

-- The stack above tap's own frames, outermost last, as 2.6.0's trace lists it; it
-- ends at the main chunk (Spindle's own driver frames above it are not the user's).
local function traceback(from_result)
    local trace = {}
    if from_result then
        trace[1] = {line = RESULT_LINE, source = SOURCE, filename = 'builtin/tap.lua',
                    what = 'Lua', namewhat = 'method', name = 'test', src = 'builtin/tap.lua'}
    end
    local level, started = 3, false
    while true do
        local info = getinfo(level, 'nSl')
        if info == nil or info.source == '@driver.lua' then
            break
        end
        if info.what == 'C' then
            -- the protected call of Spindle's fiber driver is not the user's
            local caller = getinfo(level + 1, 'S')
            if caller == nil or caller.source == '@driver.lua' then
                break
            end
        end
        if info.source == SOURCE then
            if started and info.name == 'test' then
                local frame = frame_of(info)
                frame.line = RUNNER_LINE
                trace[#trace + 1] = frame
            end
        else
            started = true
            trace[#trace + 1] = frame_of(info)
            if info.what == 'main' then
                break
            end
        end
        level = level + 1
    end
    return trace
end

local function write_extra(test, extra)
    local keys = {}
    for key in pairs(extra) do
        keys[#keys + 1] = key
    end
    table.sort(keys)
    local order = ORDERS[table.concat(keys, ' ')] or keys
    local lines = {}
    for _, key in ipairs(order) do
        local value = extra[key]
        if key == 'trace' and type(value) == 'table' then
            lines[#lines + 1] = 'trace:\n'
            for _, frame in ipairs(value) do
                local first = true
                for _, name in ipairs(FRAME_KEYS) do
                    if frame[name] ~= nil then
                        lines[#lines + 1] = (first and '- ' or '  ') .. yaml_pair(name, frame[name])
                        first = false
                    end
                end
            end
        else
            lines[#lines + 1] = yaml_pair(key, value)
        end
    end
    local prefix = indent(test) .. '  '
    local text = table.concat(lines)
    io_write(prefix, '---\n')
    io_write((text:gsub('[^\n]+', function(line) return prefix .. line end)))
    io_write(prefix, '...\n')
end

local function report(test, cond, message, extra, from_result)
    test.total = test.total + 1
    if cond then
        io_write(indent(test), string_format('ok - %s\n', tostring(message)))
        return true
    end
    test.failed = test.failed + 1
    io_write(indent(test), string_format('not ok - %s\n', tostring(message)))
    extra = extra or {}
    if test.trace then
        extra.trace = traceback(from_result)
        local last = extra.trace[#extra.trace]
        if last ~= nil then
            extra.filename, extra.line = last.filename, last.line
        end
    end
    if next(extra) ~= nil then
        write_extra(test, extra)
    end
    return false
end

function test_mt.ok(test, cond, message, extra)
    return report(test, cond, message, extra)
end

function test_mt.fail(test, message, extra)
    return report(test, false, message, extra)
end

function test_mt.skip(test, message, extra)
    return report(test, true, tostring(message) .. ' # skip', extra)
end

function test_mt.diag(test, fmt, ...)
    io_write(indent(test), '# ', string_format(fmt, ...), '\n')
end

function test_mt.plan(test, planned)
    test.planned = planned   -- kept even when it cannot be printed, as in 2.6.0
    if not pcall(string_format, '%d', planned) then
        error(string_format("builtin/tap.lua:242: bad argument #2 to 'format' " ..
                            '(number expected, got %s)', type(planned)), 0)
    end
    io_write(indent(test), string_format('1..%d\n', planned))
end

function test_mt.is(test, got, expected, message, extra)
    extra = extra or {}
    extra.got, extra.expected = got, expected
    local pass = got == expected
    if test.strict and type(got) ~= type(expected) then
        pass = false
    end
    return report(test, pass, message, extra)
end

function test_mt.isnt(test, got, unexpected, message, extra)
    extra = extra or {}
    extra.got, extra.unexpected = got, unexpected
    local pass = got ~= unexpected
    if test.strict and type(got) ~= type(unexpected) then
        pass = true
    end
    return report(test, pass, message, extra)
end

-- Walks two values; on the first difference leaves its path and both leaves in extra.
local function same_deeply(got, expected, extra, strict, path)
    if type(got) ~= 'table' or type(expected) ~= 'table' then
        extra.got, extra.expected = got, expected
        if strict and type(got) ~= type(expected) then
            return false
        end
        return got == expected
    end
    for key, value in pairs(got) do
        local where = path .. '/' .. tostring(key)
        if not same_deeply(value, expected[key], extra, strict, where) then
            extra.path = extra.path or where
            return false
        end
    end
    for key, value in pairs(expected) do
        if got[key] == nil then
            local where = path .. '/' .. tostring(key)
            if not same_deeply(nil, value, extra, strict, where) then
                extra.path = extra.path or where
                return false
            end
        end
    end
    return true
end

function test_mt.is_deeply(test, got, expected, message, extra)
    extra = extra or {}
    extra.strict = test.strict
    local pass = same_deeply(got, expected, extra, test.strict, '/')
    if pass then
        extra.got, extra.expected, extra.path = nil, nil, nil
    end
    return report(test, pass, message, extra)
end

function test_mt.like(test, got, pattern, message, extra)
    extra = extra or {}
    extra.got, extra.expected = got, pattern
    return report(test, string_find(tostring(got), pattern) ~= nil, message, extra)
end

function test_mt.unlike(test, got, pattern, message, extra)
    extra = extra or {}
    extra.got, extra.expected = got, pattern
    return report(test, string_find(tostring(got), pattern) == nil, message, extra)
end

local function type_check(kind)
    return function(test, value, message, extra)
        extra = extra or {}
        extra.got, extra.expected = type(value), kind
        return report(test, type(value) == kind, message, extra)
    end
end

test_mt.isnil = function(test, value, message, extra)
    extra = extra or {}
    extra.got, extra.expected = value, 'nil'
    return report(test, value == nil and type(value) == 'nil', message, extra)
end
test_mt.isnumber = type_check('number')
test_mt.isstring = type_check('string')
test_mt.istable = type_check('table')
test_mt.isboolean = type_check('boolean')
test_mt.isfunction = type_check('function')

function test_mt.isudata(test, value, utype, message, extra)
    extra = extra or {}
    extra.expected, extra.got = string_format('userdata<%s>', tostring(utype)), type(value)
    if type(value) ~= 'userdata' then
        return report(test, false, message, extra)
    end
    local mt = getmetatable(value)
    return report(test, mt ~= nil and mt.__name == utype, message, extra)
end

function test_mt.iscdata(test, value, ctype, message, extra)
    local ffi = require('ffi')
    ctype = ffi.typeof(ctype)
    extra = extra or {}
    extra.expected, extra.got = tostring(ctype), type(value)
    if type(value) ~= 'cdata' then
        return report(test, false, message, extra)
    end
    return report(test, ffi.istype(ctype, value), message, extra)
end

local function new_test(parent, name)
    local test = setmetatable({
        name = name, parent = parent, planned = 0, total = 0, failed = 0,
        level = parent and parent.level + 1 or 0,
        trace = parent == nil and true or parent.trace,
        strict = parent ~= nil and parent.strict or false,
    }, test_object_mt)
    return test
end

function test_mt.check(test)
    local parent = test.parent
    if test.planned ~= test.total then
        if parent ~= nil then
            report(parent, false, 'bad plan', {planned = test.planned, run = test.total}, true)
        else
            test:diag('bad plan: planned %d run %d', test.planned, test.total)
        end
    elseif test.failed > 0 then
        if parent ~= nil then
            report(parent, false, 'failed subtests',
                   {planned = test.planned, failed = test.failed}, true)
        else
            test:diag('failed subtest: %d', test.failed)
        end
    elseif parent ~= nil then
        report(parent, true, test.name)
    end
    return test.planned == test.total and test.failed == 0
end

function test_mt.test(test, name, fun)   -- `fun`: named as 2.6.0's, its traces show it
    local child = new_test(test, name)
    child:diag('%s', tostring(name))
    fun(child)
    child:diag('%s: end', tostring(name))
    return child:check()
end

local tap = {}

function tap.test(name, fun)
    io_write('TAP version 13\n')
    local test = new_test(nil, name)
    if fun ~= nil then
        test:diag('%s', tostring(name))
        fun(test)
        test:diag('%s: end', tostring(name))
        return test:check()
    end
    return test
end

return tap
