-- reset.lua: Limiter.Reset of one (rule, key) pair: deletes its state and
-- remembers the Reset's time, so that every process' own count of the pair
-- from before it stops counting (see mirror.go's hold and decide.lua). It
-- deletes before it writes: Redis at maxmemory refuses a script's first
-- write that would grow it, and a Reset must free memory even then. An
-- entry of the scripts' templates (see remote.go and now.lua).
--
-- KEYS[1]  the time of the pair's last Reset.
-- KEYS[2..] the pair's state: its penalty state and every kind's meter.
-- ARGV[1]  the Reset's time, in µs.
-- ARGV[2]  how long the time is kept, in ms: as long as state from before
--          it could still count.
--
-- The time written is later than the one there (by 1µs when the Reset's
-- is not), so that each Reset leaves a time of its own: a reservation's
-- record holds the one it followed (see allow.lua's Reserve and undo.lua).
--
-- Returns 1.
{{- define "reset" -}}
redis.call('DEL', unpack(KEYS, 2))
local tomb = KEYS[1]
{{template "reset.mark" "ARGV[1]"}}
redis.call('SET', tomb, at, 'PX', ARGV[2])
return 1
{{- end}}

{{/* reset.mark declares at, the time a Reset at the Lua expression given
as the piece's argument writes under tomb (a local the caller declares):
that time, or 1µs after the one there when it is not later. */}}
{{- define "reset.mark" -}}
local at = tonumber({{.}})
local before = tonumber(redis.call('GET', tomb) or '')
if before and before >= at then
  at = before + 1
end
at = string.format('%d', at)
{{- end}}
