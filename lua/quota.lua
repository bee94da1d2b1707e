-- quota.lua: the calendar quota of one (rule, key) pair (Kind
-- CalendarQuota): the events of the current period. Lua has no time zones:
-- Go computes the period's bounds from the call's time and passes them.
-- internal/meter's Quota keeps the same two numbers on the local path.
--
-- The quota is a STRING 'start count', or 'start count g' once a give-back
-- (undo.lua) took events back from it: the start of the period (µs) the
-- count belongs to, the count, and the mark of a give-back in that period.
-- A count of another period counts as 0, and so does its mark. It expires
-- a second after its period ends.
--
-- Pieces of the scripts' templates (see remote.go and now.lua), put into a
-- script where it names them; nothing here is a function. The pieces every
-- kind has (quota.args ... quota.restore) are those of the decision
-- (decide.lua says what each must do and which locals it reads and sets);
-- this kind's own locals are start and finish (the period's bounds, µs),
-- stored (the STRING), c (the period's events) and given ('', or ' g' when
-- a give-back took events back in the period: see quota.given). quota.take_back and
-- quota.owe change a quota outside a decision (undo.lua, writeback.lua).

{{- define "quota.args" -}}
local start, finish = tonumber({{.Second}}), tonumber({{.Fifth}})
{{- end}}

{{/* quota.state declares stored, c and given: the events of the period
that begins at start, and its mark, of the quota whose key is the Lua
expression given as the piece's argument. */}}
{{- define "quota.state" -}}
local stored = redis.call('GET', {{.}})
local c, given = 0, ''
if stored then
  local sp = string.find(stored, ' ', 1, true)
  if sp and tonumber(string.sub(stored, 1, sp - 1)) == start then
    {{template "decide.marked"}}
  end
end
{{- end}}

{{/* quota.given: a give-back took events back from the period the
decision counts (see decide.lua). */}}
{{- define "quota.given"}}given ~= ''{{end}}

{{- define "quota.read" -}}
{{template "quota.state" "key"}}
{{- end}}

{{- define "quota.count" -}}
count = c
{{- end}}

{{- define "quota.retry" -}}
retry = finish - now
{{- end}}

{{/* quota.reset: how long until the period ends, 0 when it holds no
events. */}}
{{- define "quota.reset" -}}
if c > 0 then
  reset = finish - now
else
  reset = 0
end
{{- end}}

{{/* quota.record records n events in the period and sets reset to how
long until it ends. */}}
{{- define "quota.record" -}}
c = c + n
reset = finish - now
redis.call('SET', key, string.format('%d %d%s', start, c, given), 'PX', {{template "ttl.arg" "reset"}})
{{- end}}

{{/* quota.short is an allowing call's reply (see allow.lua): count alone,
since retry is 0 and reset finish - now (quota.record), which Go computes
from the plan and the time it sent (parseReply). */}}
{{- define "quota.short"}}count{{end}}

{{- define "quota.pending" -}}
reset = finish - now
{{- end}}

{{- define "quota.keep"}}start = start, finish = finish, c = c, given = given{{end}}
{{- define "quota.restore" -}}
local start, finish, c, given = p.start, p.finish, p.c, p.given
{{- end}}

{{/* quota.take_back takes back up to n events recorded in the period
(undo.lua), keeping the key's expiry, sets back (the caller's) to how
many, and marks the period as one a give-back took from. */}}
{{- define "quota.take_back" -}}
back = math.min(c, n)
if back > 0 then
  c, given = c - back, ' g'
  redis.call('SET', key, string.format('%d %d%s', start, c, given), 'KEEPTTL')
end
{{- end}}

{{/* quota.owe adds n events counted without Redis (writeback.lua) in the
period, unless Redis holds a later period already, and keeps the quota
until a second after the period ends; now lies inside the period. */}}
{{- define "quota.owe" -}}
local later = false
if stored then
  local sp = string.find(stored, ' ', 1, true)
  later = sp and tonumber(string.sub(stored, 1, sp - 1)) > start
end
if not later then
  local reset
  {{template "quota.record"}}
end
{{- end}}

{{/* quota.undo takes the events back from the period they went into. */}}
{{- define "quota.undo" -}}
local start = tonumber(ARGV[3])
{{template "quota.state" "key"}}
{{template "quota.take_back"}}
{{- end}}

{{/* quota.free, quota.take and quota.giveback are the quota's pieces of
grant.lua. The slots are events of now's period, counted as a decision
counts them, and usable until it ends: each use happens in the period that
counts it. A give-back takes back from that period only (quota.undo), and
only while the pair's last Reset is the one the grant saw. */}}
{{- define "quota.free" -}}
{{template "quota.read"}}
count = c
{{- end}}

{{- define "quota.take" -}}
c = c + g
redis.call('SET', key, string.format('%d %d%s', start, c, given), 'PX', {{template "ttl.arg" "finish - now"}})
usable, at, empty = math.min(prefetch, finish - now), start, finish - now
{{- end}}

{{- define "quota.giveback" -}}
local n, back, start = back_n, 0, tonumber(back_at)
{{template "quota.state" "key"}}
{{template "quota.take_back"}}
{{- end}}

{{/* quota.writeback adds the events of the writer's period. */}}
{{- define "quota.writeback" -}}
local now, start, finish = tonumber(ARGV[11]), tonumber(ARGV[13]), tonumber(ARGV[14])
{{template "writeback.stamped" "start"}}
local n = stamped
if n > 0 then
  {{template "quota.state" "key"}}
  {{template "quota.owe"}}
end
{{- end}}
