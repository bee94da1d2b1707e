-- penalty.lua: the warning/ban ladder of one (rule, key) pair: its state, a
-- HASH with v (violations), l (time of the last violation, µs), b (end of
-- the ban, µs) and k (bans while the violations were remembered), and the
-- violation that climbs it. penalty.go keeps the same four numbers on the
-- local path and computes the same ladder.
--
-- Pieces of the scripts' templates (see remote.go and now.lua), put into a
-- script where it names them; nothing here is a function. Their locals are
-- pen (the HASH's key), the penalty's six numbers in two arguments
-- (penalty.args and penalty.ladder), and v, last, ban_end and k (penalty.read).

{{/* penalty.args declares memory (µs violations are remembered), the one
number of a penalty every decision needs, from ARGV at the index the Lua
expression .PenaltyAt computes (the first of the penalty's two arguments). */}}
{{- define "penalty.args" -}}
local memory = tonumber(ARGV[{{.PenaltyAt}}])
{{- end}}

{{/* penalty.ladder declares the rest of a penalty's numbers, read only by a
call that climbs the ladder or peeks, from the one argument after memory
that joins them by ':' (each argument sent costs Redis ~1.3k instructions,
callgrind): warn_after (0: no warning stage), ban_after (>= 1), ban_for
(µs), growth of each further ban (1: every ban lasts ban_for), max_ban (µs). */}}
{{- define "penalty.ladder" -}}
local warn_after, ban_after, ban_for, growth, max_ban = string.match(ARGV[{{.PenaltyAt}} + 1], '^([^:]+):([^:]+):([^:]+):([^:]+):([^:]+)$')
warn_after, ban_after, ban_for = tonumber(warn_after), tonumber(ban_after), tonumber(ban_for)
growth, max_ban = tonumber(growth), tonumber(max_ban)
{{- end}}

{{/* penalty.read declares v, last, ban_end and k as the HASH pen holds
them (0 when it holds none). Most keys have no violations on record: an
EXISTS answers for them for less than an HMGET's table of four nils
(7.6k of a decision's ~108k Redis instructions, counted with callgrind). */}}
{{- define "penalty.read" -}}
local v, last, ban_end, k = 0, 0, 0, 0
if redis.call('EXISTS', pen) == 1 then
  local state = redis.call('HMGET', pen, 'v', 'l', 'b', 'k')
  v = tonumber(state[1]) or 0
  last = tonumber(state[2]) or 0
  ban_end = tonumber(state[3]) or 0
  k = tonumber(state[4]) or 0
end
{{- end}}

{{/* penalty.deliver adds strikes violations, the last of them at struck,
that the calling process counted itself, to v and writes them: as if each
had been counted on Redis when it happened (penalty.forget then measures
Memory from the latest). */}}
{{- define "penalty.deliver" -}}
if struck > last then
  last = struck
end
v = v + strikes
local keep = memory
if ban_end - now > keep then
  keep = ban_end - now
end
redis.call('HSET', pen, 'v', string.format('%d', v), 'l', string.format('%d', last))
redis.call('PEXPIRE', pen, {{template "ttl.arg" "keep"}})
{{- end}}

{{/* penalty.ban writes a ban that ends at the Lua expression given as the
piece's argument, which Redis lacks, and keeps pen until it ends (and for
memory at least). */}}
{{- define "penalty.ban" -}}
local ends = {{.}}
local keep = memory
if ends - now > keep then
  keep = ends - now
end
redis.call('HSET', pen, 'b', string.format('%d', ends))
redis.call('PEXPIRE', pen, {{template "ttl.arg" "keep"}})
{{- end}}

{{/* penalty.forget forgets the violations (and the bans remembered with
them) at the time the Lua expression given as the piece's argument
computes, when memory µs have passed since the last. */}}
{{- define "penalty.forget" -}}
if v > 0 and {{.}} - last >= memory then
  v = 0
  k = 0
end
{{- end}}

{{/* penalty.violate records one more violation at now and sets v, k,
flags (1 warned, 2 banned) and banned_for, how long the ban it starts lasts
(0: none). The ban lasts ban_for, times growth for each ban remembered, at
most max_ban: repeated products, not a power, so that Go computes the very
same number. */}}
{{- define "penalty.violate" -}}
{{template "penalty.ladder" .}}
v = v + 1
local keep = memory
if v >= ban_after then
  local d = ban_for
  if growth > 1 then
    for _ = 1, k do
      d = math.min(d * growth, max_ban)
    end
  end
  banned_for = math.floor(d)
  k = k + 1
  flags = 2
  if banned_for > keep then
    keep = banned_for
  end
elseif warn_after > 0 and v >= warn_after then
  flags = 1
end
redis.call('HSET', pen, 'v', string.format('%d', v), 'l', string.format('%d', now), 'k', string.format('%d', k))
if banned_for > 0 then
  -- Only a new ban moves the ban's end: an earlier one stays on record,
  -- as the local path keeps it (it matters to a clock that goes back).
  redis.call('HSET', pen, 'b', string.format('%d', now + banned_for))
end
redis.call('PEXPIRE', pen, {{template "ttl.arg" "keep"}})
{{- end}}
