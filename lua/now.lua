-- now.lua: the time of a call. The first piece of every script that
-- decides (see remote.go); it defines a function and no entry point.
--
-- Every time is a whole number of microseconds since the Unix epoch. Numbers
-- that go into a key, a member, a score or a value are formatted with '%d',
-- never with tostring or '..': real Redis prints Lua numbers as '%.14g',
-- which turns a microsecond timestamp into '1.7953441438916e+15'.

-- now_us returns the time the caller passed, or Redis' own TIME when the
-- caller passed an empty string (one clock for every application instance).
local function now_us(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
