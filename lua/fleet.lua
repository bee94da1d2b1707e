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
--          that finds it missing, and kept for epoch_life past the last
--          heartbeat, so that it outlives the set by far: a set that ran
--          out (every Limiter cut off from Redis, or Redis paused, for
--          three heartbeat periods) is made anew under the same epoch,
--          while Redis losing its data (a restart without persistence,
--          a FLUSHALL) loses the epoch with it, and the next heartbeat
--          makes a newer one. epoch_life is a day: a fleet whose every
--          Limiter stayed away from Redis for longer than that counts it
--          as a loss, which costs under-admission, never more.
-- KEYS[5]  when the data Redis lost ended, as far as it can tell, in µs
--          (<prefix>v1:{instances}:lost): made with the epoch, and kept
--          as long. What Redis lost was recorded before it: the server's
--          start (rounded up to the second after it) when nothing since
--          can have removed data from the running server (no FLUSHALL,
--          FLUSHDB, SWAPDB, DEBUG or CONFIG RESETSTAT in INFO
--          commandstats, no key evicted, never a replica: what it lost, it
--          lost by stopping), and the epoch itself otherwise (a FLUSHALL
--          may have come just before it). A key of its own, not a part of
--          the epoch's value, so that a Limiter of an earlier version
--          reads the epoch as before; one missing (an epoch such a
--          Limiter made) is the epoch.
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
-- Redis' TIME, the epoch, and when the data Redis lost ended. Those are the Limiters that owe some, those that missed
-- a heartbeat (their last is more than one and a half of this one's
-- periods old: Redis may be out of their reach, and they decide without
-- it), and those whose last heartbeat came before ARGV[4]. (A Limiter's
-- last heartbeat is its score less three periods: this one's, as every
-- Limiter of a fleet has the same.)
{{- define "fleet" -}}
-- fleet_info returns the field name of INFO's section, or nil (a server
-- that does not report it: miniredis).
local function fleet_info(section, name)
  local text = redis.pcall('INFO', section)
  if type(text) ~= 'string' then
    return nil
  end
  return string.match(text, name .. ':([^\r\n]*)')
end
-- fleet_lost_by returns a time by which everything the server may have
-- lost had been recorded, at most now (see KEYS[5]): INFO's uptime is in
-- whole seconds, so the start lies before the second after now's less it.
local function fleet_lost_by(now)
  local uptime = tonumber(fleet_info('server', 'uptime_in_seconds') or '')
  if not uptime or fleet_info('replication', 'role') ~= 'master'
      or fleet_info('replication', 'second_repl_offset') ~= '-1'
      or fleet_info('stats', 'evicted_keys') ~= '0' then
    return now
  end
  local commands = redis.pcall('INFO', 'commandstats')
  if type(commands) ~= 'string' then
    return now
  end
  for _, c in ipairs({'flushall', 'flushdb', 'swapdb', 'debug', 'config|resetstat'}) do
    if string.find(commands, 'cmdstat_' .. c .. ':', 1, true) then
      return now
    end
  end
  return math.min(now, (math.floor(now / 1000000) - uptime + 1) * 1000000)
end
local set, born, owing, epoch_key, lost_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now
do
  {{template "now.redis"}}
end
local live = 3 * tonumber(ARGV[2])
local epoch_life = 86400000
local epoch = redis.call('GET', epoch_key)
local lost_by
if not epoch then
  epoch = string.format('%d', now)
  lost_by = string.format('%d', fleet_lost_by(now))
  redis.call('SET', epoch_key, epoch, 'PX', epoch_life)
  redis.call('SET', lost_key, lost_by, 'PX', epoch_life)
else
  lost_by = redis.call('GET', lost_key) or epoch
  if redis.call('PTTL', epoch_key) < epoch_life / 2 then
    redis.call('PEXPIRE', epoch_key, epoch_life)
    redis.call('PEXPIRE', lost_key, epoch_life)
  end
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
return {redis.call('ZCARD', set), now - since, unsettled, now, tonumber(epoch), tonumber(lost_by)}
{{- end}}
