-- quota_allow.lua: decides one call of Limiter.Allow, AllowN or Peek for a
-- calendar quota (Kind CalendarQuota). Composed after now.lua, quota.lua,
-- decide.lua and, for a rule with a penalty, strikes.lua.
--
-- KEYS[1]  the rule's quota (see quota.lua).
-- KEYS[2]  the rule's penalty state (see strikes.lua); absent for a rule
--          without penalty.
-- ARGV[1]  now in µs since the epoch: the time Go computed the period from
--          (never '': the period and now come from the same clock).
-- ARGV[2]  the start of the period that holds now, in µs.
-- ARGV[3]  rate: events allowed in the period.
-- ARGV[4]  n: events this call asks for; 0 peeks.
-- ARGV[5]  the end of the period (the next one's start), in µs.
-- ARGV[6]..ARGV[11]  the penalty's, as allow.lua's.
--
-- Returns decide's nine numbers (see decide.lua): count is the events in
-- the period, retry_us and reset_us run to its end.
local now = now_us(ARGV[1])
local rate = tonumber(ARGV[3])
local pa
if KEYS[2] then
  pa = penalty_args(6)
end
local m = quota_meter(KEYS[1], now, tonumber(ARGV[2]), tonumber(ARGV[5]))
return (decide(m, KEYS[2], now, rate, tonumber(ARGV[4]), pa, true))
