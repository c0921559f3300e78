-- Tarantool's `title` module: the process title "<interpretor> <script> <status>:
-- <custom>" (ps shows it), built from parts that update() changes one by one. get()
-- answers the title and the parts; the title stays empty until the first update.
local native, interpretor_name = ...
local type, pairs, ipairs, tostring, rawget = type, pairs, ipairs, tostring, rawget

local parts = {interpretor_name = interpretor_name}
local script_known = false

-- the script's name, from arg[0] once the script runs (the module is made before)
local function learn_script()
    if script_known then
        return
    end
    local arg = rawget(_G, 'arg')
    local zero = type(arg) == 'table' and arg[0] or nil
    if type(zero) == 'string' and zero ~= '' then
        parts.script_name = parts.script_name or zero:match('[^/]*$')
        script_known = true
    end
end
local current = ''
local KEYS = {'interpretor_name', 'script_name', 'status', 'custom_title'}

local function format_title()
    local words = {}
    for _, key in ipairs({'interpretor_name', 'script_name'}) do
        local value = parts[key]
        if value ~= nil and value ~= '' then
            words[#words + 1] = tostring(value)
        end
    end
    local text = table.concat(words, ' ')
    if parts.status ~= nil and parts.status ~= '' then
        text = text .. ' <' .. tostring(parts.status) .. '>'
    end
    if parts.custom_title ~= nil and parts.custom_title ~= '' then
        text = text .. ': ' .. tostring(parts.custom_title)
    end
    return text
end

local title = {}

function title.update(opts)
    learn_script()
    if type(opts) == 'string' then
        opts = {custom_title = opts}
    end
    if type(opts) == 'table' then
        for _, key in ipairs(KEYS) do
            if opts[key] ~= nil then
                parts[key] = opts[key]
            end
        end
        -- a key given as nil in a literal is absent: status = nil keeps nothing to
        -- clear, as in 2.6.0; an empty string clears the part
        for key, value in pairs(opts) do
            if value == '' then parts[key] = nil end
        end
    end
    current = format_title()
    native.set(current)
end

function title.get()
    learn_script()
    local copy = {}
    for key, value in pairs(parts) do
        copy[key] = value
    end
    return current, copy
end

return title
