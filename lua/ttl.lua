-- ttl.lua: how long Redis keeps a key, the one formula of every script
-- that sets an expiry. A piece of the scripts' templates (see remote.go and
-- now.lua): it names no function.

{{/* ttl is the expiry, in ms, of a key that must last the µs of the Lua
expression given as the piece's argument: rounded up to a whole ms, plus
a second, so that no clock of the callers' and no rounding lets a key
expire while a call could still count it. */}}
{{- define "ttl" -}}
math.ceil(({{.}}) / 1000) + 1000
{{- end}}

{{/* ttl.arg is ttl as the string of a whole number, for redis.call: Redis
writes a Lua number it is handed with '%.17g', which costs it ~3.6k
instructions a number (callgrind: snprintf was a sixth of a decision's),
far more than string.format's '%d'. */}}
{{- define "ttl.arg" -}}
string.format('%d', {{template "ttl" .}})
{{- end}}
