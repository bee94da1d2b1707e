-- sliding.lua: an exact sliding-window log for a rule without penalty.
--
-- KEYS[1]  the rule's log: a ZSET of events, score = time in µs.
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  window in µs.
-- ARGV[3]  rate: events allowed in any window-long interval.
-- ARGV[4]  n: events this call asks for; 0 peeks: answers for n = 1 and
--          records nothing.
-- ARGV[5]  member id for this call (unique across processes and calls).
--
-- Returns {allowed, count, retry_us, reset_us, violations, flags,
-- ban_left_us, memory_left_us, bans}:
-- allowed 1 or 0; count the events in the window after the call; retry_us
-- how long until the same call could pass (0 when allowed); reset_us how long
-- until the window is empty. The last five are always 0
-- here; they keep the reply the same shape as penalty.lua's.
local log = KEYS[1]
local now = now_us(ARGV[1])
local window = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local n = tonumber(ARGV[4])

if n == 0 then
  local count = live_count(log, now, window)
  local allowed = 0
  if count + 1 <= rate then
    allowed = 1
  end
  return {allowed, count, retry_after(log, now, window, rate, count, 1), reset_after(log, now, window), 0, 0, 0, 0, 0}
end

trim(log, now, window)
local count = live_count(log, now, window)
if count + n <= rate then
  record(log, now, window, n, ARGV[5])
  return {1, count + n, 0, window, 0, 0, 0, 0, 0}
end
return {0, count, retry_after(log, now, window, rate, count, n), reset_after(log, now, window), 0, 0, 0, 0, 0}
