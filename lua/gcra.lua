-- gcra.lua: the GCRA bucket of one (rule, key) pair (Kind GCRA), a token
-- bucket kept as its theoretical arrival time (TAT): the time the bucket is
-- full again. gcra.go keeps the same numbers on the local path and
-- computes the same integers.
--
-- The emission interval T = window / rate is normalised by their gcd into
-- wq / rq (µs), so that it is exact: time is counted in ticks of 1/rq µs,
-- one event costs wq ticks and a full bucket holds burst * wq. The TAT is
-- w whole µs plus r ticks (0 <= r < rq), kept in a STRING 'w r' ('w' when r
-- is 0) that expires when the bucket is full (plus a second). At now the
-- bucket owes debt = max(0, (w - now) * rq + r) ticks; n events fit when
-- count + n <= burst for count = ceil(debt / wq), the tokens in use, which
-- is debt + n * wq <= burst * wq. Every product stays below 2^53 (Go checks
-- the rule), so doubles compute them exactly; gcra_div divides exactly.
--
-- Pieces of the scripts' templates (see remote.go and now.lua), put into a
-- script where it names them. The pieces every kind has (gcra.args ...
-- gcra.restore) are those of the decision (decide.lua says what each must
-- do and which locals it reads and sets); this kind's own locals are wq and
-- rq, w and r (the TAT), debt (ticks owed at now; nil when the bucket counts
-- as full) and used (tokens in use). The burst is the decision's rate.
-- gcra.give_back and gcra.owe change a bucket outside a decision (undo.lua,
-- writeback.lua). The one function, gcra_div, is defined only by the
-- scripts whose pieces call it (gcra.div), several times a call.

{{/* gcra.div defines gcra_div(a, b): floor(a / b) for integers a >= 0,
b >= 1 below 2^53, correcting the double division's rounding. */}}
{{- define "gcra.div" -}}
local function gcra_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end
{{- end}}

{{- define "gcra.args" -}}
local wq, rq = tonumber({{.Second}}), tonumber({{.Fifth}})
{{- end}}

{{/* gcra.state declares the TAT (w, r) of the bucket whose key is the Lua
expression given as the piece's argument, for the rq in rq. A remainder
kept for another rate (a changed rule) is cut to fit: the TAT moves by less
than 1µs, as gcra.go does. */}}
{{- define "gcra.state" -}}
local stored = redis.call('GET', {{.}})
local w, r = 0, 0
if stored then
  local sp = string.find(stored, ' ', 1, true)
  if sp then
    w, r = tonumber(string.sub(stored, 1, sp - 1)), tonumber(string.sub(stored, sp + 1))
  else
    w = tonumber(stored)
  end
  if r > rq - 1 then
    r = rq - 1
  end
end
{{- end}}

{{/* gcra.read: besides the TAT, the ticks owed at now (debt) and the tokens
in use, ceil(debt / wq) (used). When the TAT lies further ahead than any
allowed call leaves it (a clock gone backwards), debt is nil and the bucket
counts as full, and nothing that could overflow is computed. */}}
{{- define "gcra.read" -}}
{{template "gcra.state" "key"}}
local debt, used = 0, 0
local ahead = w - now
if ahead > 0 or (ahead == 0 and r > 0) then
  if ahead > gcra_div(rate * wq, rq) + 1 then
    debt, used = nil, rate
  else
    debt = ahead * rq + r
    used = gcra_div(debt + wq - 1, wq)
  end
end
{{- end}}

{{- define "gcra.count" -}}
count = used
{{- end}}

{{/* gcra.retry: how long until asked + owed tokens are free,
ceil((debt + (asked + owed) * wq - burst * wq) / rq), from w, so that a
clock gone backwards cannot overflow it. */}}
{{- define "gcra.retry" -}}
local d, rr = w - now, r
if d < 0 then
  d, rr = 0, 0
end
local x = rr + (asked + owed - rate) * wq
local up
if x >= 0 then
  up = gcra_div(x + rq - 1, rq)
else
  up = -gcra_div(-x, rq)
end
retry = d + up
if retry < 1 then
  retry = 1
end
{{- end}}

{{/* gcra.reset: how long until the bucket is full: until the TAT, rounded
up to a whole µs. */}}
{{- define "gcra.reset" -}}
local until_full = w - now
if until_full < 0 or (until_full == 0 and r == 0) then
  reset = 0
elseif r > 0 then
  reset = until_full + 1
else
  reset = until_full
end
{{- end}}

{{/* gcra.record takes n tokens at now, writes the TAT and sets reset. */}}
{{- define "gcra.record" -}}
local ticks = debt + n * wq
local q = gcra_div(ticks, rq)
w, r = now + q, ticks - q * rq
{{template "gcra.reset"}}
{{template "gcra.value"}}
redis.call('SET', key, tat, 'PX', {{template "ttl.arg" "reset"}})
{{- end}}

{{/* gcra.pending: what gcra.record will set reset to. */}}
{{- define "gcra.pending" -}}
reset = gcra_div(debt + n * wq + rq - 1, rq)
{{- end}}

{{- define "gcra.keep"}}wq = wq, rq = rq, debt = debt{{end}}
{{- define "gcra.restore" -}}
local wq, rq, debt, w, r = p.wq, p.rq, p.debt, 0, 0
{{- end}}

{{/* gcra.value declares tat, the TAT (w, r) as the bucket's STRING holds
it. */}}
{{- define "gcra.value" -}}
local tat
if r == 0 then
  tat = string.format('%d', w)
else
  tat = string.format('%d %d', w, r)
end
{{- end}}

{{/* gcra.give_back returns n tokens taken earlier (undo.lua): the TAT (w,
r, read by gcra.state) moves back by n * wq ticks, whatever the time, and
keeps the key's expiry. The caller has checked that the bucket exists. */}}
{{- define "gcra.give_back" -}}
local ticks = n * wq
local q = gcra_div(ticks, rq)
w, r = w - q, r - (ticks - q * rq)
if r < 0 then
  w, r = w - 1, r + rq
end
{{template "gcra.value"}}
redis.call('SET', key, tat, 'KEEPTTL')
{{- end}}

{{/* gcra.owe adds n tokens taken at the time at without Redis
(writeback.lua): their cost is added to the TAT (w, r) as of at,
max(TAT, at) + n * wq ticks, however far ahead of now that leaves it (a
full bucket then counts as full until time catches up; see gcra.read).
Tokens owed in stamp order move the TAT as the bucket that allowed them
moved its own. The caller writes the TAT. */}}
{{- define "gcra.owe" -}}
if w < at then
  w, r = at, 0
end
local ticks = r + n * wq
local q = gcra_div(ticks, rq)
w, r = w + q, ticks - q * rq
{{- end}}

{{/* gcra.undo gives the call's tokens back (gcra.give_back). */}}
{{- define "gcra.undo" -}}
local wq, rq = tonumber(ARGV[3]), tonumber(ARGV[4])
{{template "gcra.div"}}
{{template "gcra.state" "key"}}
if redis.call('EXISTS', key) == 1 then
  {{template "gcra.give_back"}}
  back = n
end
{{- end}}

{{/* gcra.writeback adds what is owed whatever the bucket holds (no
burst), skipping stamps older than the oldest that still counts. */}}
{{- define "gcra.writeback" -}}
local now, due = tonumber(ARGV[11]), tonumber(ARGV[12])
local wq, rq = tonumber(ARGV[13]), tonumber(ARGV[14])
{{template "gcra.div"}}
{{template "gcra.state" "key"}}
for i = first, last, 2 do
  local at = tonumber(ARGV[i])
  if at >= due then
    local n = tonumber(ARGV[i + 1])
    {{template "gcra.owe"}}
  end
end
local reset
{{template "gcra.reset"}}
if reset > 0 then
  {{template "gcra.value"}}
  redis.call('SET', key, tat, 'PX', {{template "ttl.arg" "reset"}})
end
{{- end}}

{{/* gcra.prelude: the function the bucket's pieces call. */}}
{{- define "gcra.prelude"}}{{template "gcra.div"}}{{end}}
