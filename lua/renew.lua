-- renew.lua: renews one lease of a Concurrency rule (see lease.go): moves
-- its event in the pair's log to now, so that it lives another window.
-- An entry of the scripts' templates (see remote.go and now.lua).
--
-- KEYS[1]  the pair's leases: a ZSET of lease ids scored by when each was
--          taken or last renewed, in µs (the exact log's shape, key ending
--          in 'l').
-- KEYS[2]  the time of the pair's last Reset (see reset.lua), or -1: the
--          pair's mark (see concurrency.lua), which a renewal keeps.
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  window: a lease's TTL, in µs.
-- ARGV[3]  the lease's id.
-- ARGV[4]  rate: the leases a pair may hold at once.
-- ARGV[5]  when the lease was taken, in the process' µs: a Reset at or
--          after it freed the lease.
-- ARGV[6]  '1' records the lease at now whatever the count: a rule in dry
--          run records the leases enforcing would have refused (see
--          lease.go's recordOver); absent otherwise.
--
-- Returns 1 when the lease was renewed, 0 when it is lost: it expired (its
-- slot may be someone else's now), a Reset freed it, or Redis lost it and
-- its slot was taken meanwhile. A lease Redis lost (a restart without
-- persistence) and nothing else took its slot is put back: a live holder's
-- renewals go on across the restart.
{{- define "renew" -}}
local log, id, tomb = KEYS[1], ARGV[3], KEYS[2]
{{template "now" "ARGV[1]"}}
local window = tonumber(ARGV[2])
if ARGV[6] ~= '1' then
  local score = redis.call('ZSCORE', log, id)
  if score then
    if tonumber(score) <= now - window then
      redis.call('ZREM', log, id)
      return 0
    end
  else
    local reset = redis.call('GET', tomb)
    if reset and tonumber(reset) >= tonumber(ARGV[5]) then
      return 0
    end
    if redis.call('ZCOUNT', log, string.format('(%d', now - window), '+inf') >= tonumber(ARGV[4]) then
      return 0
    end
  end
end
redis.call('ZADD', log, now, id)
redis.call('PEXPIRE', log, {{template "ttl.arg" "window"}})
{{template "concurrency.mark" "window"}}
return 1
{{- end}}
