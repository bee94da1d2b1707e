-- gcra_allow.lua: decides one call of Limiter.Allow, AllowN or Peek for a
-- GCRA rule (Kind GCRA). Composed after now.lua, gcra.lua, decide.lua and,
-- for a rule with a penalty, strikes.lua.
--
-- KEYS[1]  the rule's bucket (see gcra.lua).
-- KEYS[2]  the rule's penalty state (see strikes.lua); absent for a rule
--          without penalty.
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  wq: the cost of one event in ticks (Window / gcd(Window, Rate)).
-- ARGV[3]  burst: the bucket's size in events.
-- ARGV[4]  n: events this call asks for; 0 peeks.
-- ARGV[5]  rq: ticks per µs (Rate / gcd(Window, Rate)).
-- ARGV[6]..ARGV[11]  the penalty's, as allow.lua's.
--
-- Returns decide's nine numbers (see decide.lua): count is the tokens in
-- use, reset_us how long until the bucket is full.
local now = now_us(ARGV[1])
local burst = tonumber(ARGV[3])
local pa
if KEYS[2] then
  pa = penalty_args(6)
end
local m = gcra_meter(KEYS[1], now, tonumber(ARGV[2]), tonumber(ARGV[5]), burst)
return (decide(m, KEYS[2], now, burst, tonumber(ARGV[4]), pa, true))
