-- Tarantool's `help` module: the globals help() and tutorial(), and help.en_US with
-- their texts. help() answers the console's help text in a table, as 2.6.0's; the
-- tutorial's screens are Spindle's own, walked as 2.6.0's: tutorial() shows the
-- current screen, tutorial('next' | 'prev' | 'start' | n) moves (n out of range is
-- clamped to the first or last screen).
local help_text = ...
local type, error, setmetatable, tonumber = type, error, setmetatable, tonumber

local SCREENS = {
[[
Tutorial -- Screen #1 -- Hello
==============================

This is Spindle's console: type a Lua request, press Enter, and the
values it returns are printed back as YAML. Try:

1 + 2, "two strings", 'or three'

When you are ready for the next screen, enter <tutorial("next")>.
]],
[[
Tutorial -- Screen #2 -- Variables and tables
=============================================

Variables need no declaration; a table holds a list or a map:

n = 42
t = {"first", "second", key = "value"}
n, t[1], t.key

Next: <tutorial("next")>, back: <tutorial("prev")>.
]],
[[
Tutorial -- Screen #3 -- Functions and loops
============================================

function square(x) return x * x end
s = 0
for i = 1, 10 do s = s + square(i) end
s

Next: <tutorial("next")>, back: <tutorial("prev")>.
]],
[[
Tutorial -- Screen #4 -- Starting the database
==============================================

box.cfg{} starts the database in the current directory: it recovers
what an earlier run left there, and writes every change to the
write-ahead log before it answers.

box.cfg{}

Next: <tutorial("next")>, back: <tutorial("prev")>.
]],
[[
Tutorial -- Screen #5 -- Spaces and indexes
===========================================

Data lives in spaces of tuples; a space needs a primary index:

s = box.schema.space.create('tester')
s:create_index('primary', {parts = {1, 'unsigned'}})
s:insert{1, 'Roxette'}
s:insert{2, 'Scorpions', 2015}
s:select{}

Next: <tutorial("next")>, back: <tutorial("prev")>.
]],
[[
Tutorial -- Screen #6 -- Iterating
==================================

space:pairs() is an iterator of the fun module: use it in a for
loop, or chain map, filter and the like on it:

s:pairs():map(function(t) return t[2] end):totable()

Next: <tutorial("next")>, back: <tutorial("prev")>.
]],
[[
Tutorial -- Screen #7 -- Fibers
===============================

Fibers run side by side in one thread, each yielding while it waits:

fiber = require('fiber')
f = fiber.create(function() fiber.sleep(1) print('awake') end)
f:status()

Next: <tutorial("next")>, back: <tutorial("prev")>.
]],
[[
Tutorial -- Screen #8 -- Where next
===================================

That is the tour. The Tarantool 2.6 manual describes every module and
option Spindle offers: https://www.tarantool.io/en/doc/2.6/

Back: <tutorial("prev")>, from the start: <tutorial("start")>.
]],
}

local USAGE = 'Usage: tutorial("start" | "next" | "prev" | 1 .. ' .. #SCREENS .. ')'
local screen = 1

local function tutorial(_, where)
    if where == nil then
        return SCREENS[screen]
    end
    local wanted
    if where == 'start' then
        wanted = 1
    elseif where == 'next' then
        wanted = screen + 1
    elseif where == 'prev' then
        wanted = screen - 1
    else
        wanted = tonumber(where)
        if wanted == nil then
            error(USAGE)
        end
    end
    if wanted < 1 then
        wanted = 1
    elseif wanted > #SCREENS then
        wanted = #SCREENS
    end
    screen = wanted
    return SCREENS[screen]
end

local en_US = {help = help_text, tutorial = SCREENS}
local help = {
    help = setmetatable({}, {__call = function() return {help_text} end}),
    tutorial = setmetatable({}, {__call = tutorial}),
}
return help, en_US
