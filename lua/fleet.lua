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
-- KEYS[3]  the Limiters that owe Redis decisions they made without it
--          (<prefix>v1:{instances}:owing): a ZSET of ids scored as in
--          KEYS[1].
-- KEYS[4]  when Redis' data began, as far as the fleet knows, in µs
--          (<prefix>v1:{instances}:epoch): made by the first heartbeat
--          that finds it missing, and kept for epochLife past the last
--          heartbeat, so that it outlives the set by far: a set that ran
--          out (every Limiter cut off from Redis, or Redis paused, for
--          three heartbeat periods) is made anew under the same epoch,
--          while Redis losing its data (a restart without persistence,
--          a FLUSHALL) loses the epoch with it, and the next heartbeat
--          makes a newer one. epochLife is a day: a fleet whose every
--          Limiter stayed away from Redis for longer than that counts it
--          as a loss, which costs under-admission, never more.
-- ARGV[1]  the Limiter's id.
-- ARGV[2]  the Limiter's heartbeat period in µs.
-- ARGV[3]  '1' when the Limiter owes Redis decisions it made without it
--          (the write-back has not brought them yet), '0' otherwise.
-- ARGV[4]  a time in µs (Redis' TIME) since which the other Limiters must
--          have announced themselves to count as settled, or '0': the
--          calling Limiter's calls failed until then, and so may theirs.
--
-- Trims the Limiters whose time ran out, adds or refreshes this one (and
-- its debt), keeps the sets for as long as their longest-lived member, and
-- returns how many Limiters are live, this one included, how old the set
-- is, in µs, how many other live Limiters may hold decisions Redis lacks,
-- Redis' TIME, and the epoch. Those are the Limiters that owe some, those that missed
-- a heartbeat (their last is more than one and a half of this one's
-- periods old: Redis may be out of their reach, and they decide without
-- it), and those whose last heartbeat came before ARGV[4]. (A Limiter's
-- last heartbeat is its score less three periods: this one's, as every
-- Limiter of a fleet has the same.)
{{- define "fleet" -}}
local set, born, owing, epoch_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now
do
  {{template "now.redis"}}
end
local live = 3 * tonumber(ARGV[2])
local epoch_life = 86400000
local epoch = redis.call('GET', epoch_key)
if not epoch then
  epoch = string.format('%d', now)
  redis.call('SET', epoch_key, epoch, 'PX', epoch_life)
elseif redis.call('PTTL', epoch_key) < epoch_life / 2 then
  redis.call('PEXPIRE', epoch_key, epoch_life)
end
if redis.call('EXISTS', set) == 0 then
  redis.call('SET', born, string.format('%d', now))
end
redis.call('ZREMRANGEBYSCORE', set, '-inf', string.format('%d', now))
redis.call('ZADD', set, string.format('%d', now + live), ARGV[1])
redis.call('ZREMRANGEBYSCORE', owing, '-inf', string.format('%d', now))
if ARGV[3] == '1' then
  redis.call('ZADD', owing, string.format('%d', now + live), ARGV[1])
else
  redis.call('ZREM', owing, ARGV[1])
end
local keep = math.ceil(live / 1000)
if redis.call('PTTL', set) < keep then
  redis.call('PEXPIRE', set, keep)
  redis.call('PEXPIRE', born, keep)
end
if redis.call('PTTL', owing) < keep then
  redis.call('PEXPIRE', owing, keep)
end
local since = tonumber(redis.call('GET', born)) or now
local unsettled, seen = 0, {}
local before = math.max(now + live / 2, tonumber(ARGV[4]) + live)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', set, '-inf', string.format('(%d', before))) do
  if id ~= ARGV[1] then
    seen[id] = true
    unsettled = unsettled + 1
  end
end
for _, id in ipairs(redis.call('ZRANGE', owing, 0, -1)) do
  if id ~= ARGV[1] and not seen[id] then
    unsettled = unsettled + 1
  end
end
return {redis.call('ZCARD', set), now - since, unsettled, now, tonumber(epoch)}
{{- end}}
