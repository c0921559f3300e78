-- net.box's space and index objects (2.6.0's space_metatable, index_metatable and
-- _install_schema), built from the peer's _vspace, _vindex and _vcollation rows.
-- Loaded by net_box.lua with the pieces of it they use; returns space_metatable,
-- index_metatable and install_schema.
local parts = ...
local request, encoders, make_mt, base_mt = parts.request, parts.encoders, parts.make_mt,
    parts.base_mt
local check_space_arg, check_index_arg = parts.check_space_arg, parts.check_index_arg
local check_primary_index, check_iterator_type = parts.check_primary_index,
    parts.check_iterator_type
local ITER, SELECT, INSERT, REPLACE = parts.ITER, parts.SELECT, parts.INSERT, parts.REPLACE
local UPDATE, DELETE, UPSERT, CALL = parts.UPDATE, parts.DELETE, parts.UPSERT, parts.CALL
local type, pairs, ipairs, next, tonumber, setmetatable, error = type, pairs, ipairs, next,
    tonumber, setmetatable, error
local string_format, string_upper = string.format, string.upper

local function nothing_or_data(value)
    if value ~= nil then
        return value
    end
end

local function space_metatable(remote)
    local methods = {}

    function methods:insert(t, opts)
        check_space_arg(self, 'insert')
        return request(remote, 'insert', opts, self._tuple_mt, INSERT,
                       encoders.insert(self.id, t))
    end

    function methods:replace(t, opts)
        check_space_arg(self, 'replace')
        return request(remote, 'replace', opts, self._tuple_mt, REPLACE,
                       encoders.insert(self.id, t))
    end

    function methods:select(key, opts)
        check_space_arg(self, 'select')
        return check_primary_index(self):select(key, opts)
    end

    function methods:delete(key, opts)
        check_space_arg(self, 'delete')
        return check_primary_index(self):delete(key, opts)
    end

    function methods:update(key, oplist, opts)
        check_space_arg(self, 'update')
        return check_primary_index(self):update(key, oplist, opts)
    end

    function methods:upsert(t, oplist, opts)
        check_space_arg(self, 'upsert')
        return nothing_or_data(request(remote, 'upsert', opts, nil, UPSERT,
                                       encoders.upsert(self.id, t, oplist)))
    end

    function methods:get(key, opts)
        check_space_arg(self, 'get')
        return check_primary_index(self):get(key, opts)
    end

    function methods:format(format)
        if format == nil then
            return self._format
        end
        box.error(box.error.UNSUPPORTED, 'net.box', 'setting space format')
    end

    return {__index = methods, __metatable = false}
end

local function index_metatable(remote)
    local methods = {}

    function methods:select(key, opts)
        check_index_arg(self, 'select')
        local key_is_nil = key == nil or (type(key) == 'table' and #key == 0)
        local iterator = check_iterator_type(opts, key_is_nil)
        local offset = tonumber(opts and opts.offset) or 0
        local limit = tonumber(opts and opts.limit) or 0xFFFFFFFF
        return (request(remote, 'select', opts, self.space._tuple_mt, SELECT,
                        encoders.select(self.space.id, self.id, iterator, offset, limit, key)))
    end

    -- (the positions of these checks in 2.6.0's net_box.lua, which its errors carry)
    local function get_like(name, iterator, limit, line)
        return function(self, key, opts)
            check_index_arg(self, name)
            if opts and opts.buffer then
                error(string_format("builtin/box/net_box.lua:%d: index:%s() doesn't support "
                                    .. '`buffer` argument', line, name), 0)
            end
            return nothing_or_data(request(remote, name, opts, self.space._tuple_mt, SELECT,
                encoders.select(self.space.id, self.id, iterator, 0, limit, key)))
        end
    end
    methods.get = get_like('get', ITER.EQ, 2, 1527)
    methods.min = get_like('min', ITER.GE, 1, 1538)
    methods.max = get_like('max', ITER.LE, 1, 1549)

    function methods:count(key, opts)
        check_index_arg(self, 'count')
        if opts and opts.buffer then
            error("builtin/box/net_box.lua:1560: index:count() doesn't support `buffer` "
                  .. 'argument', 0)
        end
        local code = string_format('box.space.%s.index.%s:count', self.space.name, self.name)
        return request(remote, 'count', opts, nil, CALL, encoders.call(code, {key, opts}))
    end

    function methods:delete(key, opts)
        check_index_arg(self, 'delete')
        return nothing_or_data(request(remote, 'delete', opts, self.space._tuple_mt, DELETE,
                                       encoders.delete(self.space.id, self.id, key)))
    end

    function methods:update(key, oplist, opts)
        check_index_arg(self, 'update')
        return nothing_or_data(request(remote, 'update', opts, self.space._tuple_mt, UPDATE,
                                       encoders.update(self.space.id, self.id, key, oplist)))
    end

    return {__index = methods, __metatable = false}
end

-- The tuple metatable of a space format: field names -> field numbers.
local function format_mt(format)
    local names = {}
    for i, field in ipairs(format) do
        local name = type(field) == 'table' and (field.name or field[1])
        if type(name) == 'string' then
            names[name] = i
        end
    end
    if next(names) == nil then
        return base_mt
    end
    return make_mt(names)
end

-- _install_schema(): conn.space from the rows of _vspace, _vindex, _vcollation.
local function install_schema(self, schema_version, spaces, indices, collations)
    local sl, space_mt, index_mt = {}, self._space_mt, self._index_mt
    for _, space in pairs(spaces) do
        local name, id = space[3], space[1]
        local format = space[7] or {}
        local s
        if self.space ~= nil and self.space[id] ~= nil then
            s = self.space[id]
        else
            s = setmetatable({}, space_mt)
        end
        s.id, s.name, s.engine, s.field_count = id, name, space[4], space[5]
        s.enabled, s.index, s.temporary, s.is_sync = true, {}, false, false
        s._format, s._tuple_mt, s.connection = format, format_mt(format), self
        if #space > 5 then
            local opts = space[6]
            if type(opts) == 'table' then
                s.temporary = not not opts.temporary
                s.is_sync = not not opts.is_sync
            elseif type(opts) == 'string' then
                s.temporary = string.match(opts, 'temporary') ~= nil
            end
        end
        sl[id], sl[name] = s, s
    end
    for _, index in pairs(indices) do
        local idx = {space = index[1], id = index[2], name = index[3],
                     type = string_upper(index[4]), parts = {}}
        local opts, parts = index[5], index[6]
        if type(opts) == 'number' then          -- a 1.6 peer
            idx.unique = opts == 1
            for k = 0, parts - 1 do
                idx.parts[k + 1] = {type = index[7 + k * 2 + 1], fieldno = index[7 + k * 2] + 1}
            end
        else
            for k = 1, #parts do
                local part = parts[k]
                local collation_id = part.collation
                local pk = {type = part[2] or part.type, fieldno = (part[1] or part.field) + 1,
                            is_nullable = part.is_nullable or false}
                if collations == nil then
                    pk.collation_id = collation_id
                elseif collation_id ~= nil then
                    pk.collation = collations[collation_id + 1][2]
                end
                idx.parts[k] = pk
            end
            idx.unique = not not opts.unique
        end
        local s = sl[idx.space]
        if s ~= nil then
            s.index[idx.id], s.index[idx.name] = idx, idx
            idx.space = s
            setmetatable(idx, index_mt)
        end
    end
    self.schema_version = schema_version
    self.space = sl
    self._on_schema_reload:run(self)
end

return space_metatable, index_metatable, install_schema
