-- Tarantool's `buffer` module: ibuf objects (a `struct ibuf` cdata laid out as 2.6.0's:
-- buf, rpos, wpos, epos, start_capacity) with alloc, reserve, checksize, read, size,
-- capacity, unused, recycle, reset; IBUF_SHARED, READAHEAD, static_alloc and the
-- scratch registers reg1, reg2, reg_array. Memory comes from malloc; capacities
-- grow as 2.6.0's slab-backed ones do (doubling from start_capacity, then the slab's
-- power of two less its 48-byte header), so :capacity() answers the same numbers.
local ffi = require('ffi')
local type, error, tonumber = type, error, tonumber

ffi.cdef([[
struct ibuf {
    void *slabc;
    char *buf;
    char *rpos;
    char *wpos;
    char *epos;
    size_t start_capacity;
};
union c_register {
    size_t size;
    void *p;
    int i;
    long l;
    float f;
    double d;
    int8_t i8;
    uint8_t u8;
    int16_t i16;
    uint16_t u16;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
};
void *malloc(size_t size);
void free(void *ptr);
]])

local READAHEAD = 16320
local SLAB_HEADER, SLAB_MIN = 48, 16384
local STATIC_SIZE = 13 * 1024          -- 2.6.0's static buffer of each thread

local ibuf_t = ffi.typeof('struct ibuf')
local char_ptr = ffi.typeof('char *')

local function check(ibuf, method)
    if not ffi.istype(ibuf_t, ibuf) then
        error(string.format('builtin/buffer.lua:74: Attempt to call method without ' ..
                            'object, use ibuf:%s()', method), 3)
    end
end

local function release(ibuf)
    if ibuf.buf ~= nil then
        ffi.C.free(ibuf.buf)
    end
    ibuf.buf, ibuf.rpos, ibuf.wpos, ibuf.epos = nil, nil, nil, nil
end

local function size_of(ibuf) return tonumber(ibuf.wpos - ibuf.rpos) end
local function capacity_of(ibuf) return tonumber(ibuf.epos - ibuf.buf) end

local function reserve(ibuf, size)
    size = tonumber(size)
    if ibuf.wpos + size <= ibuf.epos then
        return ibuf.wpos
    end
    local used, capacity = size_of(ibuf), capacity_of(ibuf)
    if used + size <= capacity then          -- room enough once the data moves down
        ffi.copy(ibuf.buf, ibuf.rpos, used)
    else
        local wanted = capacity > 0 and capacity or tonumber(ibuf.start_capacity)
        if wanted < 1 then wanted = 1 end
        while wanted < used + size do wanted = wanted * 2 end
        local slab = SLAB_MIN
        while slab < wanted + SLAB_HEADER do slab = slab * 2 end
        capacity = slab - SLAB_HEADER
        local memory = ffi.C.malloc(capacity)
        if memory == nil then
            box.error(box.error.MEMORY_ISSUE, capacity, 'slab allocator', 'ibuf')
        end
        memory = ffi.cast(char_ptr, memory)
        if used > 0 then ffi.copy(memory, ibuf.rpos, used) end
        if ibuf.buf ~= nil then ffi.C.free(ibuf.buf) end
        ibuf.buf, ibuf.epos = memory, memory + capacity
    end
    ibuf.rpos, ibuf.wpos = ibuf.buf, ibuf.buf + used
    return ibuf.wpos
end

local methods = {}

function methods.reserve(ibuf, size)
    check(ibuf, 'reserve')
    return reserve(ibuf, size)
end

function methods.alloc(ibuf, size)
    check(ibuf, 'alloc')
    local ptr = reserve(ibuf, size)
    ibuf.wpos = ibuf.wpos + size
    return ptr
end

function methods.checksize(ibuf, size)
    check(ibuf, 'checksize')
    reserve(ibuf, size)
    return ibuf.wpos
end

function methods.read(ibuf, size)
    check(ibuf, 'read')
    local ptr = ibuf.rpos
    ibuf.rpos = ibuf.rpos + size
    return ptr
end

function methods.size(ibuf)
    check(ibuf, 'size')
    return size_of(ibuf)
end

function methods.capacity(ibuf)
    check(ibuf, 'capacity')
    return capacity_of(ibuf)
end

function methods.unused(ibuf)
    check(ibuf, 'unused')
    return tonumber(ibuf.epos - ibuf.wpos)
end

function methods.recycle(ibuf)
    check(ibuf, 'recycle')
    release(ibuf)
end

function methods.reset(ibuf)
    check(ibuf, 'reset')
    ibuf.rpos, ibuf.wpos = ibuf.buf, ibuf.buf
end

ffi.metatype(ibuf_t, {
    __index = methods,
    __tostring = function() return '<ibuf>' end,
})

local buffer = {READAHEAD = READAHEAD}

function buffer.ibuf(start_capacity)
    if start_capacity ~= nil and type(start_capacity) ~= 'number' then
        error('builtin/buffer.lua:74: Usage: ibuf([size])', 2)
    end
    local ibuf = ffi.gc(ibuf_t(), release)
    ibuf.start_capacity = start_capacity or READAHEAD
    if start_capacity ~= nil and start_capacity > 0 then
        reserve(ibuf, start_capacity)          -- a size given is allocated at once
    end
    return ibuf
end

buffer.IBUF_SHARED = buffer.ibuf()

-- static_alloc(type[, count]): a `type *` to scratch memory of a ring 2.6.0 sizes at
-- 13 KB, reused once the ring wraps (for short-lived values only, as there)
local static = ffi.new('char[?]', STATIC_SIZE)
local static_pos = 0
function buffer.static_alloc(ctype, count)
    local size = ffi.sizeof(ctype) * (count or 1)
    if size > STATIC_SIZE then
        return nil
    end
    if static_pos + size > STATIC_SIZE then
        static_pos = 0
    end
    local ptr = static + static_pos
    static_pos = static_pos + size
    return ffi.cast(ffi.typeof('$ *', ffi.typeof(ctype)), ptr)
end

buffer.reg1 = ffi.new('union c_register')
buffer.reg2 = ffi.new('union c_register')
buffer.reg_array = ffi.new('union c_register[?]', 128)

return buffer
