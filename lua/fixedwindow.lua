-- fixedwindow.lua: the fixed-window counter of one (rule, key) pair (Kind
-- FixedWindow): the events of the current window, windows of the rule's
-- length aligned to the Unix epoch. internal/meter's FixedWindow keeps
-- the same two numbers on the local path.
--
-- The counter is a STRING 'w c', or 'w c g' once a give-back (undo.lua)
-- took events back from it: the index of the window its count belongs to
-- (now / window, rounded down), the count, and the mark of a give-back in
-- that window. A count of an earlier window counts as 0, and so does its
-- mark. It expires a second after its window ends.
--
-- Pieces of the scripts' templates (see remote.go and now.lua), put into a
-- script where it names them; nothing here is a function. The pieces every
-- kind has (fixed.args ... fixed.restore) are those of the decision
-- (decide.lua says what each must do and which locals it reads and sets);
-- this kind's own locals are window (µs), w and c (the window and its
-- events, moved to now's window) and given ('', or ' g' when a give-back
-- took events back in window w: see fixed.given). fixed.tail, fixed.undo and
-- fixed.writeback serve allow.lua's reply, undo.lua and writeback.lua.

{{- define "fixed.args" -}}
local window = tonumber({{.Second}})
{{- end}}

{{/* fixed.state declares w, c and given as the counter whose key is the
Lua expression given as the piece's argument holds them. */}}
{{- define "fixed.state" -}}
local stored = redis.call('GET', {{.}})
local w, c, given = 0, 0, ''
if stored then
  local sp = string.find(stored, ' ', 1, true)
  w = tonumber(string.sub(stored, 1, sp - 1))
  {{template "decide.marked"}}
end
{{- end}}

{{/* fixed.given: a give-back took events back from the window the
decision counts (see decide.lua). */}}
{{- define "fixed.given"}}given ~= ''{{end}}

{{/* fixed.roll moves w and c to the window whose index is the Lua
expression given as the piece's argument, when it is later than w. */}}
{{- define "fixed.roll" -}}
if {{.}} > w then
  w, c, given = {{.}}, 0, ''
end
{{- end}}

{{- define "fixed.read" -}}
{{template "fixed.state" "key"}}
local idx = math.floor(now / window)
{{template "fixed.roll" "idx"}}
{{- end}}

{{- define "fixed.count" -}}
count = c
{{- end}}

{{/* fixed.retry: a spent window comes back only with the next. */}}
{{- define "fixed.retry" -}}
retry = (w + 1) * window - now
{{- end}}

{{- define "fixed.reset" -}}
if c > 0 then
  reset = (w + 1) * window - now
else
  reset = 0
end
{{- end}}

{{- define "fixed.record" -}}
c = c + n
reset = (w + 1) * window - now
redis.call('SET', key, string.format('%d %d%s', w, c, given), 'PX', {{template "ttl.arg" "reset"}})
{{- end}}

{{- define "fixed.pending" -}}
reset = (w + 1) * window - now
{{- end}}

{{- define "fixed.keep"}}window = window, w = w, c = c, given = given{{end}}
{{- define "fixed.restore" -}}
local window, w, c, given = p.window, p.w, p.c, p.given
{{- end}}

{{/* fixed.tail: the window the call's events went into, the last number
of allow.lua's reply (see redisKind.windowed and undo.lua). */}}
{{- define "fixed.tail"}}w{{end}}

{{/* fixed.undo takes the events back from the window they went into
(ARGV[3]) only: once the counter has moved on they no longer count. */}}
{{- define "fixed.undo" -}}
{{template "fixed.give" "tonumber(ARGV[3])"}}
{{- end}}

{{/* fixed.give takes n events back from the window whose index is the Lua
expression given as the piece's argument, sets back to how many, and marks
the window as one a give-back took from. */}}
{{- define "fixed.give" -}}
{{template "fixed.state" "key"}}
if w == {{.}} then
  back = math.min(c, n)
  if back > 0 then
    redis.call('SET', key, string.format('%d %d g', w, c - back), 'KEEPTTL')
  end
end
{{- end}}

{{/* fixed.free, fixed.take and fixed.giveback are the counter's pieces of
grant.lua. The slots are events of now's window, counted as a decision
counts them, and usable until it ends: each use happens in the window that
counts it. A give-back takes back from that window only, and only while
the pair's last Reset is the one the grant saw. */}}
{{- define "fixed.free" -}}
{{template "fixed.read"}}
count = c
{{- end}}

{{- define "fixed.take" -}}
c = c + g
local ends = (w + 1) * window - now
redis.call('SET', key, string.format('%d %d%s', w, c, given), 'PX', {{template "ttl.arg" "ends"}})
usable, at, empty = math.min(prefetch, ends), w, ends
{{- end}}

{{- define "fixed.giveback" -}}
local n, back = back_n, 0
{{template "fixed.give" "tonumber(back_at)"}}
{{- end}}

{{/* fixed.writeback adds the events of the writer's window; those of an
earlier window no longer count. */}}
{{- define "fixed.writeback" -}}
local window, now = tonumber(ARGV[2]), tonumber(ARGV[11])
{{template "fixed.state" "key"}}
local idx = math.floor(now / window)
{{template "fixed.roll" "idx"}}
{{template "writeback.stamped" "w"}}
if stamped > 0 then
  c = c + stamped
  redis.call('SET', key, string.format('%d %d%s', w, c, given), 'PX', {{template "ttl.arg" "(w + 1) * window - now"}})
end
{{- end}}
