-- Tarantool's `strict` module: strict.on() makes reading an undeclared global, or
-- assigning one from inside a function, an error; strict.off() lifts it. A global is
-- declared by assigning it from a main chunk (or from C).
local getinfo, rawset, rawget, error = debug.getinfo, rawset, rawget, error
local getmetatable, setmetatable = getmetatable, setmetatable

local declared = {}

local function what()
    local info = getinfo(3, 'S')
    return info and info.what or 'C'
end

local guard = {
    __newindex = function(t, name, value)
        if not declared[name] then
            local kind = what()
            if kind ~= 'main' and kind ~= 'C' then
                error("assign to undeclared variable '" .. tostring(name) .. "'", 2)
            end
            declared[name] = true
        end
        rawset(t, name, value)
    end,
    __index = function(_, name)
        if not declared[name] and what() ~= 'C' then
            error("variable '" .. tostring(name) .. "' is not declared", 2)
        end
        return rawget(_, name)
    end,
}

local strict = {}
local saved

function strict.on()
    local mt = getmetatable(_G)
    if mt == guard then
        return
    end
    saved = mt
    setmetatable(_G, guard)
end

function strict.off()
    if getmetatable(_G) == guard then
        setmetatable(_G, saved)
    end
end

return strict
