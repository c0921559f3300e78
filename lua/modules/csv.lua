-- Tarantool's `csv` module: load(readable[, opts]), iterate(readable[, opts]) and
-- dump(table[, opts, writable]), reading and writing as 2.6.0's: fields split on the
-- delimiter, quoted with quote_char (doubled inside quotes), leading and trailing
-- spaces of a field dropped outside quotes, '\n', '\r' and "\r\n" end a record, a
-- record cut by the end inside quotes is dropped with "CSV file has errors" on stderr.
-- opts: delimiter (','), quote_char ('"'), chunk_size (4096: a readable's read size),
-- skip_head_lines (records skipped first). A readable is a string or an object with
-- read(self, size) (a fio file, an io file); its end is nil or ''.
local type, tostring, error, pairs, string_byte = type, tostring, error, pairs, string.byte
local format, sub, find, gsub, char = string.format, string.sub, string.find, string.gsub,
    string.char
local concat = table.concat

local function option_char(opts, name, default, line)
    local value = opts[name]
    if value == nil then
        return default
    end
    if type(value) ~= 'string' and type(value) ~= 'number' then
        error(format("builtin/csv.lua:%d: bad argument #1 to 'byte' (string expected, got %s)",
                     line, type(value)), 0)
    end
    local code = string_byte(value)
    if code == nil then
        error(format("builtin/csv.lua:%d: cannot convert 'nil' to 'char'", line), 0)
    end
    return char(code)
end

local function reader_options(readable, opts)
    if type(readable) ~= 'string' then
        if type(readable) ~= 'table' and type(readable) ~= 'userdata' then
            error(format("builtin/csv.lua:102: attempt to index local 'readable' (a %s value)",
                         type(readable)), 0)
        end
    end
    opts = opts == nil and {} or opts
    if type(opts) ~= 'table' then
        error(format("builtin/csv.lua:106: attempt to index local 'opts' (a %s value)",
                     type(opts)), 0)
    end
    return {
        delimiter = option_char(opts, 'delimiter', ',', 135),
        quote = option_char(opts, 'quote_char', '"', 136),
        chunk_size = opts.chunk_size or 4096,
        skip = opts.skip_head_lines or 0,
    }
end

-- the whole input as one string (a readable is read chunk by chunk to its end)
local function read_all(readable, chunk_size)
    if type(readable) == 'string' then
        return readable
    end
    local chunks = {}
    while true do
        local chunk = readable:read(chunk_size)
        if chunk == nil or chunk == '' then
            return concat(chunks)
        end
        chunks[#chunks + 1] = chunk
    end
end

-- Parses s; calls emit(record) for each complete record.
local function parse(s, options, emit)
    local delimiter, quote = options.delimiter, options.quote
    local record, field, spaces = {}, {}, 0
    local in_quotes, started, any = false, false, false
    local function end_field()
        record[#record + 1] = concat(field)
        field, spaces, started = {}, 0, false
    end
    local pos, len = 1, #s
    while pos <= len do
        local c = sub(s, pos, pos)
        any = true
        if in_quotes then
            if c == quote then
                if sub(s, pos + 1, pos + 1) == quote then
                    field[#field + 1] = quote
                    pos = pos + 1
                else
                    in_quotes = false
                end
            else
                field[#field + 1] = c
            end
        elseif c == delimiter then
            end_field()
        elseif c == '\n' or c == '\r' then
            end_field()
            emit(record)
            record, any = {}, false
            if c == '\r' and sub(s, pos + 1, pos + 1) == '\n' then
                pos = pos + 1
            end
        elseif c == quote then
            for _ = 1, spaces do field[#field + 1] = ' ' end
            spaces, in_quotes, started = 0, true, true
        elseif c == ' ' then
            if started then
                spaces = spaces + 1     -- kept only if more of the field follows
            end
        else
            for _ = 1, spaces do field[#field + 1] = ' ' end
            spaces, started = 0, true
            field[#field + 1] = c
        end
        pos = pos + 1
    end
    if in_quotes then
        io.stderr:write('CSV file has errors\n')
    elseif any then
        end_field()
        emit(record)
    end
end

local csv = {}

function csv.iterate(readable, opts)
    local options = reader_options(readable, opts)
    local records = {}
    parse(read_all(readable, options.chunk_size), options, function(record)
        records[#records + 1] = record
    end)
    local position = options.skip
    return function()
        position = position + 1
        local record = records[position]
        if record == nil then
            return nil
        end
        return position - options.skip, record
    end
end

function csv.load(readable, opts)
    local result = {}
    for _, record in csv.iterate(readable, opts) do
        result[#result + 1] = record
    end
    return result
end

-- the values of a table in key order of its array part first (as pairs walks them)
local function values_of(t)
    local values = {}
    for _, value in pairs(t) do
        values[#values + 1] = value
    end
    return values
end

function csv.dump(t, opts, writable)
    if type(t) ~= 'table' then
        error('builtin/csv.lua:174: Usage: dump(table[, opts, writable])', 0)
    end
    opts = opts or {}
    local delimiter = option_char(opts, 'delimiter', ',', 177)
    local quote = option_char(opts, 'quote_char', '"', 178)
    if type(t[1]) ~= 'table' then
        t = {t}
    end
    local doubled = quote .. quote
    local escaped_quote = gsub(quote, '%p', '%%%0')
    local lines = {}
    for _, row in pairs(t) do
        local fields = {}
        for n, value in ipairs(values_of(type(row) == 'table' and row or {row})) do
            local text = gsub(tostring(value), escaped_quote, doubled)
            if find(text, delimiter, 1, true) or find(text, '[\n\r]') then
                text = quote .. text .. quote
            end
            fields[n] = text
        end
        local line = concat(fields, delimiter) .. '\n'
        if writable ~= nil then
            writable:write(line)
        else
            lines[#lines + 1] = line
        end
    end
    if writable == nil then
        return concat(lines)
    end
end

return csv
