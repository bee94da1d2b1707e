-- fleet.lua: one Limiter's heartbeat, which announces it to every other
-- Limiter under the same key prefix and counts those that are live, so that
-- each can size its share of a rule while Redis cannot be used. An entry of
-- the scripts' templates (see remote.go and now.lua); its time is Redis'
-- own TIME (now.redis): one clock for every instance, whatever Clock each
-- Limiter decides at.
--
-- KEYS[1]  the instances set (<prefix>v1:{instances}): a ZSET of Limiter
--          ids, each scored by the time, in µs since the epoch, until
--          which it counts as live: its last heartbeat plus three of its
--          heartbeat periods. A score, not the heartbeat time, so that a
--          Limiter with a longer period is not trimmed by one with a
--          shorter period.
-- KEYS[2]  when the set was made, in µs (<prefix>v1:{instances}:born): a
--          set younger than three heartbeat periods may not hold every
--          live Limiter yet (Redis lost it, and the others announce
--          themselves again at their next heartbeat).
-- ARGV[1]  the Limiter's id.
-- ARGV[2]  the Limiter's heartbeat period in µs.
--
-- Trims the Limiters whose time ran out, adds or refreshes this one, keeps
-- the set for as long as its longest-lived member, and returns how many
-- Limiters are live, this one included, and how old the set is, in µs.
{{- define "fleet" -}}
local set, born = KEYS[1], KEYS[2]
local now
do
  {{template "now.redis"}}
end
local live = 3 * tonumber(ARGV[2])
if redis.call('EXISTS', set) == 0 then
  redis.call('SET', born, string.format('%d', now))
end
redis.call('ZREMRANGEBYSCORE', set, '-inf', string.format('%d', now))
redis.call('ZADD', set, string.format('%d', now + live), ARGV[1])
local keep = math.ceil(live / 1000)
if redis.call('PTTL', set) < keep then
  redis.call('PEXPIRE', set, keep)
  redis.call('PEXPIRE', born, keep)
end
local since = tonumber(redis.call('GET', born)) or now
return {redis.call('ZCARD', set), now - since}
{{- end}}
