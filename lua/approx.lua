-- approx.lua: decides one call of Limiter.Allow, AllowN or Peek for an
-- approximate rule (Rule.Approximate). Composed after window.lua,
-- counter.lua, strikes.lua and decide.lua.
--
-- KEYS[1]  the rule's counter (see counter.lua).
-- KEYS[2]  the rule's penalty state (see strikes.lua); absent for a rule
--          without penalty.
-- ARGV     as allow.lua's; ARGV[5], the member id, is unused.
--
-- Returns decide's nine numbers (see decide.lua), count being the estimate
-- rounded up, and a tenth: the index of the fixed window events recorded by
-- this call went into (now / window), which undo.lua needs.
local now = now_us(ARGV[1])
local rate = tonumber(ARGV[3])
local pa
if KEYS[2] then
  pa = penalty_args(6)
end
local m = counter_meter(KEYS[1], now, tonumber(ARGV[2]), rate)
local reply = decide(m, KEYS[2], now, rate, tonumber(ARGV[4]), pa, true)
reply[10] = m.win
return reply
