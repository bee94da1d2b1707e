-- now.lua: the time of a call. Pieces of the scripts' templates (see
-- remote.go, which says how they compose): each piece is a named Go
-- template, put into a script where a piece or an entry names it; nothing
-- here is a function, so a script pays only for what it runs.
--
-- Every time is a whole number of microseconds since the Unix epoch. Numbers
-- that go into a key, a member, a score or a value are formatted with '%d',
-- never with tostring or '..': real Redis prints Lua numbers as '%.14g',
-- which turns a microsecond timestamp into '1.7953441438916e+15'.

{{/* now declares the local now: the time in the string the Lua
expression given as the piece's argument holds (ARGV[1]), or Redis' own
TIME when that string is empty (one clock for every application
instance); and the local stamp, that string when it is not empty (nil
otherwise), for a command that takes the time as it came. */}}
{{- define "now" -}}
local now, stamp
if {{.}} ~= '' then
  stamp = {{.}}
  now = tonumber(stamp)
else
  {{template "now.redis"}}
end
{{- end}}

{{/* now.redis sets now, declared before, to Redis' own TIME. */}}
{{- define "now.redis" -}}
local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
{{- end}}
