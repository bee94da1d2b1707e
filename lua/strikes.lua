-- strikes.lua: the penalty ladder, shared by penalty.lua and counter.lua;
-- the Go side prepends this file to each of them, so it defines no entry
-- point itself. The penalty state of a key is a HASH with v (violations), l
-- (time of the last violation, µs) and b (end of the ban, µs).

-- load_strikes returns the violations remembered at now, the end of the
-- ban and how long the violations are remembered.
local function load_strikes(pen, now, memory)
  local state = redis.call('HMGET', pen, 'v', 'l', 'b')
  local v = tonumber(state[1]) or 0
  local last = tonumber(state[2]) or 0
  local ban_end = tonumber(state[3]) or 0
  if v > 0 and now - last >= memory then
    v = 0
  end
  local memory_left = 0
  if v > 0 then
    memory_left = last + memory - now
  end
  return v, ban_end, memory_left
end

-- violate records one more violation at now and returns the violations,
-- the flags (1 warned, 2 banned) and how long the ban lasts (0: no ban).
local function violate(pen, now, v, warn_after, ban_after, ban_for, memory)
  v = v + 1
  local flags = 0
  local ban_left = 0
  local ban_end = 0
  local keep = memory
  if v >= ban_after then
    ban_end = now + ban_for
    ban_left = ban_for
    flags = 2
    if ban_for > keep then
      keep = ban_for
    end
  elseif warn_after > 0 and v >= warn_after then
    flags = 1
  end
  redis.call('HSET', pen, 'v', string.format('%d', v), 'l', string.format('%d', now), 'b', string.format('%d', ban_end))
  redis.call('PEXPIRE', pen, math.ceil(keep / 1000) + 1000)
  return v, flags, ban_left
end
