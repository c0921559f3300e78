-- Tarantool's yaml module (2.6 bundles lua-yaml over libyaml): the Lua face of it.
-- Argument checks and options live here; the encoding and decoding are Python
-- (lua/modules/yaml.py) because libyaml is reached through PyYAML.
local core, encode_native, decode_native = ...

local type, select, error, tostring = type, select, error, tostring

local ENCODE_USAGE = 'Usage: encode(object, {tag_prefix = <string>, tag_handle = <string>})'
local DECODE_USAGE = 'Usage: yaml.decode(document, [{tag_only = boolean}])'

local function is_string(value)          -- lua_isstring: a string or a number
    return type(value) == 'string' or type(value) == 'number'
end

local new
function new()
    local cfg = core.new_cfg()

    local function encode(...)
        if select('#', ...) == 0 then
            error(ENCODE_USAGE, 2)
        end
        local value, options = ...
        local prefix, handle
        if options ~= nil then
            if type(options) ~= 'table' then error(ENCODE_USAGE, 2) end
            prefix, handle = options.tag_prefix, options.tag_handle
            if (prefix ~= nil and not is_string(prefix)) or
               (handle ~= nil and not is_string(handle)) or
               ((prefix == nil) ~= (handle == nil)) then
                error(ENCODE_USAGE, 2)
            end
            if prefix ~= nil then
                prefix, handle = tostring(prefix), tostring(handle)
            end
        end
        return encode_native({value}, cfg, handle, prefix)   -- a table keeps threads
    end

    local function decode(...)
        local document, options = ...
        if not is_string(document) then
            error(DECODE_USAGE, 2)
        end
        local tag_only = false
        if options ~= nil then
            if type(options) ~= 'table' then error(DECODE_USAGE, 2) end
            tag_only = options.tag_only == true
        end
        return decode_native(tostring(document), cfg, tag_only)
    end

    return {
        encode = encode,
        decode = decode,
        new = new,
        cfg = cfg,
        NULL = core.NULL,
        array_mt = core.array_mt,
        map_mt = core.map_mt,
    }
end

return new()
