-- ban.lua: bans a key by hand (Limiter.Ban) through the same penalty state
-- the ladder keeps (see penalty.lua); its violations stay as they are.
-- An entry of the scripts' templates (see remote.go and now.lua).
--
-- KEYS[1]  the rule's penalty state.
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  how long the ban lasts, in µs.
--
-- Returns the ban's length in µs.
{{- define "ban" -}}
local pen = KEYS[1]
{{template "now" "ARGV[1]"}}
local d = tonumber(ARGV[2])
redis.call('HSET', pen, 'b', string.format('%d', now + d))
local keep = {{template "ttl" "d"}}
if redis.call('PTTL', pen) < keep then
  redis.call('PEXPIRE', pen, keep)
end
return d
{{- end}}
