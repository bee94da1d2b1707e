-- sliding.lua: the exact sliding-window log of one (rule, key) pair (Kind
-- SlidingLog), a ZSET of events scored by their time in µs. slidinglog.go
-- keeps the same log on the local path.
--
-- Pieces of the scripts' templates (see remote.go and now.lua), put into a
-- script where it names them; nothing here is a function. The pieces every
-- kind has (sliding.args ... sliding.pending) are those of the decision
-- (decide.lua says what each must do and which locals it reads and sets);
-- this kind's own locals are window (µs), id (the call's member) and card
-- (true when the script reads Redis' TIME).
--
-- An event at t0 counts at now while now - t0 < window: counting goes by
-- score, '(' .. now - window, so trimming only bounds memory.

{{- define "sliding.args" -}}
local window, id, card = tonumber({{.Second}}), {{.Fifth}}, ARGV[1] == ''
{{- end}}

{{- define "sliding.read"}}{{end}}

{{/* sliding.count trims, when the call can record, what no later call can
count, and counts the live events. With a clock of the caller's (ARGV[1]
not empty) the trim keeps one more window than counting needs, so that a
call stamped up to a window earlier than calls already decided (concurrent
callers with a Clock of their own reach Redis in any order) still counts
every event it should. With Redis' TIME (card) calls come in the order of
their times, the trim keeps just the window, and after it ZCARD counts the
same events as ZCOUNT, for less. The bounds go through string.format's
'%d', never as Lua numbers: Redis writes a number it is handed with
'%.17g', for ~3.6k instructions (see ttl.arg). */}}
{{- define "sliding.count" -}}
local trimmed = {{if .Penalty}}ban_end <= now and {{end}}n > 0
if trimmed then
  local keep = 2 * window
  if card then
    keep = window
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - keep))
end
if card and trimmed then
  count = redis.call('ZCARD', key)
else
  count = redis.call('ZCOUNT', key, string.format('(%d', now - window), '+inf')
end
{{- end}}

{{/* sliding.retry: when the kth oldest live event leaves, at most
rate - (asked + owed) of the log's own events remain. */}}
{{- define "sliding.retry" -}}
local kth = (count - owed) + (asked + owed) - rate
if kth <= 0 then
  retry = 0
elseif asked + owed > rate then
  retry = window
else
  local r = redis.call('ZRANGEBYSCORE', key, string.format('(%d', now - window), '+inf', 'WITHSCORES', 'LIMIT', kth - 1, 1)
  retry = tonumber(r[2]) + window - now
end
{{- end}}

{{- define "sliding.reset" -}}
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
{{template "sliding.emptyIn"}}
{{- end}}

{{/* sliding.emptyIn sets reset, when the log is empty, from newest: its
newest member and score (empty when the log is). */}}
{{- define "sliding.emptyIn" -}}
if newest[2] == nil then
  reset = 0
else
  reset = tonumber(newest[2]) + window - now
  if reset < 0 then
    reset = 0
  end
end
{{- end}}

{{/* sliding.record: an exact log is empty a window after its newest
event. */}}
{{- define "sliding.record" -}}
do
  {{- /* now as a string for ZADD's score: the clock's argument as it came
  (stamp, see now.lua), or '%d' of Redis' TIME; never a Lua number, which
  Redis writes with '%.17g' (see ttl.arg). */}}
  local now = stamp or string.format('%d', now)
  {{template "sliding.add"}}
end
reset = window
{{- end}}

{{/* sliding.short is an allowing call's reply (see allow.lua): count
alone, since retry is 0 and reset the window (sliding.record), which Go
reads from the plan (parseReply). */}}
{{- define "sliding.short"}}count{{end}}

{{- define "sliding.pending" -}}
reset = window
{{- end}}

{{/* sliding.keep and sliding.restore carry what recording needs from a
group's decision to its recording (group.lua). */}}
{{- define "sliding.keep"}}window = window, id = id{{end}}
{{- define "sliding.restore" -}}
local window, id = p.window, p.id
{{- end}}

{{/* sliding.add adds n events at now (a number, or the string of one)
to the log key with distinct members: id (the caller's: random per
Limiter, then a per-Limiter counter), and for n > 1 a ':' and the event's
index; and keeps the log a window past its newest event. It trims
nothing. */}}
{{- define "sliding.add" -}}
if n == 1 then
  redis.call('ZADD', key, now, id)
else
  local add_at, add_id, add_n = now, id, n
  {{template "sliding.zadd"}}
end
redis.call('PEXPIRE', key, {{template "ttl.arg" "window"}})
{{- end}}

{{/* sliding.zadd adds add_n events at add_at under the members add_id:1
.. add_id:add_n. */}}
{{- define "sliding.zadd" -}}
local batch = {}
for i = 1, add_n do
  batch[#batch + 1] = add_at
  batch[#batch + 1] = add_id .. string.format(':%d', i)
  if #batch >= 2000 or i == add_n then
    redis.call('ZADD', key, unpack(batch))
    batch = {}
  end
end
{{- end}}

{{/* sliding.undo removes the call's events, named by its member id (id
alone for a call of one event, id:1 .. id:m for one of m), or with ARGV[5]
n of them from the index ARGV[5]. */}}
{{- define "sliding.undo" -}}
local from = tonumber(ARGV[5])
if not from and n == 1 then
  back = redis.call('ZREM', key, ARGV[1])
else
  local rm_id, rm_from = ARGV[1], from or 1
  local rm_to = rm_from + n - 1
  {{template "sliding.remove"}}
end
{{- end}}

{{/* sliding.remove removes the members rm_id:rm_from .. rm_id:rm_to, and
adds to back how many the log held. */}}
{{- define "sliding.remove" -}}
local batch = {}
for i = rm_from, rm_to do
  batch[#batch + 1] = rm_id .. string.format(':%d', i)
  if #batch >= 2000 or i == rm_to then
    back = back + redis.call('ZREM', key, unpack(batch))
    batch = {}
  end
end
{{- end}}

{{/* sliding.writeback adds each pair's events under members made from the
batch id, and each triple's under its own member (sliding.add). */}}
{{- define "sliding.writeback" -}}
local window = tonumber(ARGV[2])
local function record(key, now, window, n, id)
  {{template "sliding.add"}}
end
local j = 0
for i = first, last, 2 do
  j = j + 1
  record(key, ARGV[i], window, tonumber(ARGV[i + 1]), ARGV[1] .. string.format('.%d', j))
end
for i = last + 1, #ARGV, 3 do
  record(key, ARGV[i], window, tonumber(ARGV[i + 1]), ARGV[i + 2])
end
{{- end}}

{{/* sliding.free, sliding.take and sliding.giveback are the plain log's
pieces of grant.lua. No rule takes them any more: a rule with Prefetch
keeps the weighted log (weighted.lua, a grant one member whatever its
size); they stay as the reference that log's grant is measured against
(TestWeightedGrantCostFlat), and what follows says why either is exact. The log counts what it holds stamped after now - window,
future stamps of other grants included, and the slots granted are stamped
now + prefetch: every use of them happens before the grant's end (sent
before now, plus prefetch), so none is stamped earlier than its use, and
the log counts each at least a window after it. Its expiry (ttl.lua's
second beyond the window, refreshed by every call) outlives the stamps:
prefetch is at most 500 ms. A give-back removes a grant's unused members;
after a Reset they are gone already, and removing nothing changes
nothing. */}}
{{- define "sliding.free" -}}
local keep = window
if stamp then
  keep = 2 * window
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - keep))
count = redis.call('ZCOUNT', key, string.format('(%d', now - window), '+inf')
{{- end}}

{{- define "sliding.take" -}}
local add_at, add_id, add_n = string.format('%d', now + prefetch), id, g
{{template "sliding.zadd"}}
redis.call('PEXPIRE', key, {{template "ttl.arg" "window + prefetch"}})
empty = window + prefetch
{{- end}}

{{- define "sliding.giveback" -}}
local back, rm_id, rm_from, rm_to = 0, back_id, back_from, back_to
{{template "sliding.remove"}}
{{- end}}
