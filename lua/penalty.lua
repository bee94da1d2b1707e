-- penalty.lua: the sliding-window log of sliding.lua plus the penalty ladder
-- of strikes.lua: a rejection is a violation; from warn_after violations on
-- a rejection carries a warning; at ban_after violations the key is banned
-- for ban_for. Violations are forgotten memory after the last one; a ban
-- does not clear them. A banned key is rejected without touching its log or
-- violations.
--
-- KEYS[1]  the rule's log: a ZSET of events, score = time in µs.
-- KEYS[2]  the rule's penalty state (see strikes.lua).
-- ARGV[1]..ARGV[5]  as in sliding.lua: now ('' for TIME), window, rate, n
--          (0 peeks), member id.
-- ARGV[6]  warn_after (0: no warning stage).
-- ARGV[7]  ban_after (>= 1).
-- ARGV[8]  ban_for in µs.
-- ARGV[9]  memory in µs.
-- ARGV[10] growth of each further ban while violations are remembered
--          (1: every ban lasts ban_for).
-- ARGV[11] max_ban: the longest ban, in µs.
--
-- Returns {allowed, count, retry_us, reset_us, violations, flags,
-- ban_left_us, memory_left_us, bans}: as sliding.lua, plus the violations
-- remembered for the key, flags (1 warned, 2 banned), how long the ban has
-- left, how long the violations are remembered and the bans remembered with
-- them.
local log = KEYS[1]
local pen = KEYS[2]
local now = now_us(ARGV[1])
local window = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local warn_after = tonumber(ARGV[6])
local memory = tonumber(ARGV[9])

local v, ban_end, memory_left, k = load_strikes(pen, now, memory)

if ban_end > now then
  local asked = math.max(n, 1)
  local count = live_count(log, now, window)
  local ban_left = ban_end - now
  local retry = math.max(retry_after(log, now, window, rate, count, asked), ban_left)
  return {0, count, retry, reset_after(log, now, window), v, 2, ban_left, memory_left, k}
end

if n == 0 then
  local count = live_count(log, now, window)
  local allowed = 1
  local flags = 0
  if count + 1 > rate then
    allowed = 0
    if warn_after > 0 and v >= warn_after then
      flags = 1
    end
  end
  return {allowed, count, retry_after(log, now, window, rate, count, 1), reset_after(log, now, window), v, flags, 0, memory_left, k}
end

trim(log, now, window)
local count = live_count(log, now, window)
if count + n <= rate then
  record(log, now, window, n, ARGV[5])
  return {1, count + n, 0, window, v, 0, 0, memory_left, k}
end

local flags, ban_left
v, flags, ban_left, k = violate(pen, now, v, k, penalty_args(6))
local retry = math.max(retry_after(log, now, window, rate, count, n), ban_left)
return {0, count, retry, reset_after(log, now, window), v, flags, ban_left, memory, k}
