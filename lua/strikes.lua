-- strikes.lua: the penalty ladder's state of one (rule, key) pair, a HASH
-- with v (violations), l (time of the last violation, µs), b (end of the
-- ban, µs) and k (bans while the violations were remembered). A piece the
-- Go side composes into scripts (see remote.go); it defines functions and
-- no entry point. penalty.go keeps the same four numbers on the local path
-- and computes the same ladder.

-- load_strikes returns the violations remembered at now, the end of the
-- ban, how long the violations are remembered, and the bans remembered
-- with them.
local function load_strikes(pen, now, memory)
  local state = redis.call('HMGET', pen, 'v', 'l', 'b', 'k')
  local v = tonumber(state[1]) or 0
  local last = tonumber(state[2]) or 0
  local ban_end = tonumber(state[3]) or 0
  local k = tonumber(state[4]) or 0
  if v > 0 and now - last >= memory then
    v = 0
    k = 0
  end
  local memory_left = 0
  if v > 0 then
    memory_left = last + memory - now
  end
  return v, ban_end, memory_left, k
end

-- ban_length returns how long the key's next ban lasts after k remembered
-- bans: ban_for, times growth for each of them, at most max_ban. Repeated
-- products, not a power, so that Go computes the very same number.
local function ban_length(ban_for, k, growth, max_ban)
  local d = ban_for
  if growth > 1 then
    for _ = 1, k do
      d = math.min(d * growth, max_ban)
    end
  end
  return math.floor(d)
end

-- penalty_args reads a penalty's six arguments from ARGV, starting at i:
-- warn_after, ban_after, ban_for, memory, growth, max_ban.
local function penalty_args(i)
  return {
    warn_after = tonumber(ARGV[i]), ban_after = tonumber(ARGV[i + 1]),
    ban_for = tonumber(ARGV[i + 2]), memory = tonumber(ARGV[i + 3]),
    growth = tonumber(ARGV[i + 4]), max_ban = tonumber(ARGV[i + 5]),
  }
end

-- violate records one more violation at now under the penalty pa (see
-- penalty_args) and returns the violations, the flags (1 warned, 2
-- banned), how long the ban lasts (0: no ban) and the bans remembered.
local function violate(pen, now, v, k, pa)
  v = v + 1
  local flags = 0
  local ban_left = 0
  local ban_end
  local keep = pa.memory
  if v >= pa.ban_after then
    ban_left = ban_length(pa.ban_for, k, pa.growth, pa.max_ban)
    ban_end = now + ban_left
    k = k + 1
    flags = 2
    if ban_left > keep then
      keep = ban_left
    end
  elseif pa.warn_after > 0 and v >= pa.warn_after then
    flags = 1
  end
  redis.call('HSET', pen, 'v', string.format('%d', v), 'l', string.format('%d', now), 'k', string.format('%d', k))
  if ban_left > 0 then
    -- Only a new ban moves the ban's end: an earlier one stays on record,
    -- as the local path keeps it (it matters to a clock that goes back).
    redis.call('HSET', pen, 'b', string.format('%d', ban_end))
  end
  redis.call('PEXPIRE', pen, math.ceil(keep / 1000) + 1000)
  return v, flags, ban_left, k
end
