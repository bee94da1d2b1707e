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
