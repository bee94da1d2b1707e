-- allow.lua: decides one call of Limiter.Allow, AllowN or Peek for a rule's
-- exact log. Composed after window.lua, decide.lua and, for a rule with a
-- penalty, strikes.lua.
--
-- KEYS[1]  the rule's log: a ZSET of events, score = time in µs.
-- KEYS[2]  the rule's penalty state (see strikes.lua); absent for a rule
--          without penalty.
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  window in µs.
-- ARGV[3]  rate: events allowed in any window-long interval.
-- ARGV[4]  n: events this call asks for; 0 peeks: answers for n = 1 and
--          records nothing.
-- ARGV[5]  member id for this call (unique across processes and calls).
-- ARGV[6]..ARGV[11]  with a penalty: warn_after (0: no warning stage),
--          ban_after (>= 1), ban_for (µs), memory (µs), growth of each
--          further ban (1: every ban lasts ban_for), max_ban (µs).
--
-- Returns decide's nine numbers (see decide.lua).
local now = now_us(ARGV[1])
local rate = tonumber(ARGV[3])
local pa
if KEYS[2] then
  pa = penalty_args(6)
end
local m = log_meter(KEYS[1], now, tonumber(ARGV[2]), rate, ARGV[5], ARGV[1] == '')
return (decide(m, KEYS[2], now, rate, tonumber(ARGV[4]), pa, true))
