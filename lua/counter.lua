-- counter.lua: the approximate sliding-window counter of one (rule, key)
-- pair, for rules that opt into it (Rule.Approximate). Time is cut into
-- fixed windows of the rule's length; the count at now is estimated as the
-- current window's events plus the previous window's, weighted by how much
-- of the previous window the sliding window still covers: est = prev *
-- ((window - elapsed) / window) + cur. Memory is O(1) per key.
-- internal/meter's Counter computes the same numbers with the same operations in the same order, so
-- both paths decide alike.
--
-- The counter is a HASH with w (index of the current fixed window, now /
-- window), c (its events) and p (the previous one's).
--
-- Pieces of the scripts' templates (see remote.go and now.lua), put into a
-- script where it names them; nothing here is a function. The pieces every
-- kind has (counter.args ... counter.record) are those of the decision
-- (decide.lua says what each must do and which locals it reads and sets);
-- this kind's own locals are window (µs), w, c and p (the HASH's fields,
-- rolled to now) and elapsed (µs since window w began).

{{- define "counter.args" -}}
local window = tonumber({{.Second}})
{{- end}}

{{/* counter.state declares w, c and p as the counter whose key is the Lua
expression given as the piece's argument holds them. */}}
{{- define "counter.state" -}}
local state = redis.call('HMGET', {{.}}, 'w', 'c', 'p')
local w = tonumber(state[1]) or 0
local c = tonumber(state[2]) or 0
local p = tonumber(state[3]) or 0
{{- end}}

{{/* counter.roll moves w, c and p to the fixed window whose index is the
Lua expression given as the piece's argument, when it is later than w: the
current window becomes the previous one if it is the one just before. */}}
{{- define "counter.roll" -}}
if {{.}} > w then
  if {{.}} == w + 1 then
    p = c
  else
    p = 0
  end
  c = 0
  w = {{.}}
end
{{- end}}

{{- define "counter.read" -}}
{{template "counter.state" "key"}}
local idx = math.floor(now / window)
{{template "counter.roll" "idx"}}
local elapsed = now - w * window
if elapsed < 0 then
  elapsed = 0
end
{{- end}}

{{/* counter.count: the estimate, rounded up. */}}
{{- define "counter.count" -}}
count = math.ceil(p * ((window - elapsed) / window) + c)
{{- end}}

{{/* counter.retry: how long until est + asked + owed <= rate. */}}
{{- define "counter.retry" -}}
local need = rate - (asked + owed)
if need < 0 then
  retry = window
else
  local at
  if c <= need then
    at = w * window + (window - (need - c) * window / p)
  else
    at = (w + 1) * window + (window - need * window / c)
  end
  retry = math.ceil(at - now)
  if retry < 1 then
    retry = 1
  end
end
{{- end}}

{{- define "counter.reset" -}}
if c > 0 then
  reset = (w + 2) * window - now
elseif p > 0 then
  reset = (w + 1) * window - now
else
  reset = 0
end
{{- end}}

{{- define "counter.record" -}}
c = c + n
redis.call('HSET', key, 'w', string.format('%d', w), 'c', string.format('%d', c), 'p', string.format('%d', p))
redis.call('PEXPIRE', key, {{template "ttl.arg" "2 * window"}})
{{template "counter.reset"}}
{{- end}}

{{/* counter.undo takes the events back from the fixed window they went
into (ARGV[3]) while it still counts: the current one, or the one before
it, weighted. */}}
{{- define "counter.undo" -}}
{{template "counter.give" "tonumber(ARGV[3])"}}
{{- end}}

{{/* counter.give takes n events back from the fixed window whose index is
the Lua expression given as the piece's argument (see counter.undo), and
sets back to how many. */}}
{{- define "counter.give" -}}
{{template "counter.state" "key"}}
local win = {{.}}
if w == win then
  back = math.min(c, n)
  if back > 0 then
    redis.call('HSET', key, 'c', string.format('%d', c - back))
  end
elseif w == win + 1 then
  back = math.min(p, n)
  if back > 0 then
    redis.call('HSET', key, 'p', string.format('%d', p - back))
  end
end
{{- end}}

{{/* counter.free, counter.take and counter.giveback are the counter's
pieces of grant.lua. The slots are events of now's fixed window, counted
as a decision counts them (the estimate), and usable until that window
ends: each use happens in the window that holds it, as a decision's
event does. A give-back takes back as counter.undo does, and only while
the pair's last Reset is the one the grant saw. */}}
{{- define "counter.free" -}}
{{template "counter.read"}}
{{template "counter.count"}}
{{- end}}

{{- define "counter.take" -}}
c = c + g
redis.call('HSET', key, 'w', string.format('%d', w), 'c', string.format('%d', c), 'p', string.format('%d', p))
redis.call('PEXPIRE', key, {{template "ttl.arg" "2 * window"}})
usable, at, empty = math.min(prefetch, (w + 1) * window - now), w, (w + 2) * window - now
{{- end}}

{{/* counter.pace: the estimate falls as the previous window's weight
does; the next request waits prefetch (see grant.lua). */}}
{{- define "counter.pace" -}}
pace = prefetch
{{- end}}

{{- define "counter.giveback" -}}
local n, back = back_n, 0
{{template "counter.give" "tonumber(back_at)"}}
{{- end}}

{{/* counter.writeback adds each window's events where the counter still
holds that window. */}}
{{- define "counter.writeback" -}}
local window = tonumber(ARGV[2])
{{template "counter.state" "key"}}
for i = first, last, 2 do
  local win = tonumber(ARGV[i])
  local n = tonumber(ARGV[i + 1])
  {{template "counter.roll" "win"}}
  if win == w then
    c = c + n
  elseif win == w - 1 then
    p = p + n
  end
end
redis.call('HSET', key, 'w', string.format('%d', w), 'c', string.format('%d', c), 'p', string.format('%d', p))
redis.call('PEXPIRE', key, {{template "ttl.arg" "2 * window"}})
{{- end}}

{{/* counter.tail: the fixed window the call's events went into, the last
number of allow.lua's reply (see redisKind.windowed and undo.lua). */}}
{{- define "counter.tail"}}w{{end}}
