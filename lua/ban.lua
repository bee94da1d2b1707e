-- ban.lua: bans a key by hand (Limiter.Ban) through the same penalty state
-- the ladder keeps (see strikes.lua); its violations stay as they are.
-- Composed after now.lua.
--
-- KEYS[1]  the rule's penalty state.
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  how long the ban lasts, in µs.
--
-- Returns the ban's length in µs.
local pen = KEYS[1]
local now = now_us(ARGV[1])
local d = tonumber(ARGV[2])
redis.call('HSET', pen, 'b', string.format('%d', now + d))
local keep = math.ceil(d / 1000) + 1000
if redis.call('PTTL', pen) < keep then
  redis.call('PEXPIRE', pen, keep)
end
return d
