-- box.spark: Spark SQL and Spark jobs over this instance's data (lua/box/spark.py).
--
-- Every call that waits for Spark (sql, wait, cfg, compact, stop) is a
-- wait-request: the calling fiber yields until the answer comes back from the
-- Spark threads, and the instance serves everyone else meanwhile.
--
-- Loaded with (blocking, native, wait, box, tuple).
local blocking, native, wait, box, tuple = ...
local type, error, ipairs = type, error, ipairs

-- Result rows are tuples whose field names are the result's column names:
-- row[1] and row.space_name both work, and the console prints them as arrays.
local function bless(rows, names)
    if names == nil then
        return rows
    end
    local map = {}
    for i, name in ipairs(names) do
        if map[name] == nil then
            map[name] = i
        end
    end
    return tuple.bless_list(rows, tuple.make_mt(map))
end

local function check(value, kind, usage)
    if type(value) ~= kind then
        error('Usage: ' .. usage, 3)
    end
end

local function check_opts(opts, usage)
    if opts ~= nil and type(opts) ~= 'table' then
        error('Usage: ' .. usage, 3)
    end
end

local spark = {}

function spark.cfg(opts)
    check_opts(opts, 'box.spark.cfg({master = ..., conf = {...}, max_rows = ...})')
    return wait(blocking.cfg, opts)
end

function spark.sql(query, opts)
    local usage = 'box.spark.sql(query[, {max_rows = N, parquet = path, mode = ...}])'
    check(query, 'string', usage)
    check_opts(opts, usage)
    return bless(wait(blocking.sql, query, opts))
end

function spark.run(job, args, opts)
    local usage = 'box.spark.run(job_file_or_builtin[, args[, {max_rows = N}]])'
    check(job, 'string', usage)
    check_opts(opts, usage)
    return wait(blocking.run, job, args, opts)
end

function spark.wait(id, timeout)
    check(id, 'number', 'box.spark.wait(id[, timeout])')
    if timeout ~= nil then
        check(timeout, 'number', 'box.spark.wait(id[, timeout])')
    end
    return bless(wait(blocking.wait, id, timeout))
end

function spark.status(id)
    check(id, 'number', 'box.spark.status(id)')
    return native.status(id)
end

function spark.cancel(id)
    check(id, 'number', 'box.spark.cancel(id)')
    return native.cancel(id)
end

function spark.jobs()
    return native.jobs()
end

function spark.compact()
    return wait(blocking.compact)
end

function spark.stop()
    return wait(blocking.stop)
end

local function install()
    rawset(box, 'spark', spark)
end

return {install = install}
