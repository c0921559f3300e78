-- debug.sourcefile/sourcedir of 2.6.0, loaded as its builtin/debug.lua: the
-- getinfo call and the arithmetic sit on the lines its errors name (4 and 10).
local function sourcefile(level)
    local info = debug.getinfo(level == nil and 2 or level, 'S')
    local source = info and info.source
    if source == nil or source:sub(1, 1) ~= '@' then return nil end
    return source:sub(2)
end
local function sourcedir(level)
    level = (level == nil and 2 or level) + 1
    -- (not a tail call: sourcefile counts this frame)
    local file = sourcefile(level)
    return file and file:match('^(.*)/') or '.'
end
debug.sourcefile, debug.sourcedir = sourcefile, sourcedir
