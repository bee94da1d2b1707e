-- counter.lua: the approximate sliding-window counter, for rules that opt
-- into it, with the penalty ladder of strikes.lua when the rule has one.
-- Time is cut into fixed windows of the rule's length; the count at now is
-- estimated as the current window's events plus the previous window's,
-- weighted by how much of the previous window the sliding window still
-- covers: est = prev * ((window - elapsed) / window) + cur. Memory is O(1)
-- per key. The Go side computes the same numbers with the same operations in
-- the same order, so both paths decide alike.
--
-- KEYS[1]  the counter: a HASH with w (index of the current fixed window,
--          now / window), c (its events) and p (the previous one's).
-- KEYS[2]  the penalty state (see strikes.lua); absent for a rule without
--          penalty.
-- ARGV[1]..ARGV[4]  now ('' for TIME), window, rate, n (0 peeks: answers
--          for n = 1 and records nothing); ARGV[5] is unused.
-- ARGV[6]..ARGV[11]  with a penalty: warn_after, ban_after, ban_for, memory,
--          growth, max_ban, as in penalty.lua.
--
-- Returns {allowed, count, retry_us, reset_us, violations, flags,
-- ban_left_us, memory_left_us, bans} as penalty.lua does; count is the estimate
-- rounded up.
local key = KEYS[1]
local pen = KEYS[2]
local now = now_us(ARGV[1])
local window = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local n = tonumber(ARGV[4])

local state = redis.call('HMGET', key, 'w', 'c', 'p')
local w = tonumber(state[1]) or 0
local c = tonumber(state[2]) or 0
local p = tonumber(state[3]) or 0
local idx = math.floor(now / window)
if idx > w then
  if idx == w + 1 then
    p = c
  else
    p = 0
  end
  c = 0
  w = idx
end
local elapsed = now - w * window
if elapsed < 0 then
  elapsed = 0
end

local function estimate()
  local frac = (window - elapsed) / window
  return math.ceil(p * frac + c)
end

-- retry_in returns how long until est + asked <= rate.
local function retry_in(asked)
  local need = rate - asked
  if need < 0 then
    return window
  end
  local at
  if c <= need then
    at = w * window + (window - (need - c) * window / p)
  else
    at = (w + 1) * window + (window - need * window / c)
  end
  local retry = math.ceil(at - now)
  if retry < 1 then
    retry = 1
  end
  return retry
end

local function reset_in()
  if c > 0 then
    return (w + 2) * window - now
  elseif p > 0 then
    return (w + 1) * window - now
  end
  return 0
end

local v, ban_end, memory_left, k = 0, 0, 0, 0
local warn_after, memory
if pen then
  warn_after = tonumber(ARGV[6])
  memory = tonumber(ARGV[9])
  v, ban_end, memory_left, k = load_strikes(pen, now, memory)
end

local count = estimate()
local asked = math.max(n, 1)
if ban_end > now then
  local ban_left = ban_end - now
  local retry = ban_left
  if count + asked > rate then
    retry = math.max(retry_in(asked), ban_left)
  end
  return {0, count, retry, reset_in(), v, 2, ban_left, memory_left, k}
end

if count + asked <= rate then
  if n == 0 then
    return {1, count, 0, reset_in(), v, 0, 0, memory_left, k}
  end
  c = c + n
  redis.call('HSET', key, 'w', string.format('%d', w), 'c', string.format('%d', c), 'p', string.format('%d', p))
  redis.call('PEXPIRE', key, math.ceil(2 * window / 1000) + 1000)
  return {1, count + n, 0, reset_in(), v, 0, 0, memory_left, k}
end

local retry = retry_in(asked)
if n == 0 or not pen then
  local flags = 0
  if n == 0 and pen and warn_after > 0 and v >= warn_after then
    flags = 1
  end
  return {0, count, retry, reset_in(), v, flags, 0, memory_left, k}
end
local flags, ban_left
v, flags, ban_left, k = violate(pen, now, v, k, penalty_args(6))
return {0, count, math.max(retry, ban_left), reset_in(), v, flags, ban_left, memory, k}
