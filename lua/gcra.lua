-- gcra.lua: the GCRA bucket of one (rule, key) pair (Kind GCRA), a token
-- bucket kept as its theoretical arrival time (TAT): the time the bucket is
-- full again. internal/meter's Bucket keeps the same numbers on the local
-- path and computes the same integers.
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
-- as full) and used (tokens in use), ext (nil unless the bucket has
-- outstanding reservations, see below) and given (the give-back mark, see
-- below; 0: none). The burst is the decision's rate.
-- gcra.settle and gcra.owe change a bucket outside a decision (undo.lua,
-- writeback.lua). The decision's one function, gcra_div, is defined only
-- by the scripts whose pieces call it (gcra.div), several times a call;
-- gcra.settle defines two more, in undo.lua only.
--
-- Reservations (Reserve, and AllowAll's pairs that a later pair may undo)
-- cannot be given back by moving the TAT back: a call that came after
-- them at a drained bucket would be undone with them. A bucket with
-- outstanding reservations keeps them in its own STRING, after the TAT:
--
--   'w r mw mr cw cr|id xw xr cw cr n|id ...'
--
-- (ext: mw mr, the TAT of the events but the outstanding reservations, the
-- main sequence; cw cr, C*T, what the main sequence's events since the
-- first reservation cost, kept as a time so that it stays exact however
-- long the bucket never fills; then one record per outstanding
-- reservation, in arrival order: its id, x = max(main TAT when it came, its
-- time), main's C*T when it came, and its n). Every time is whole µs and
-- ticks, as the TAT. The TAT still counts every event, reservations at
-- their n, so every decision reads it as before; one that records moves
-- the main sequence too, and one that finds the bucket full (TAT <= now)
-- forgets the reservations: no give-back can move anything any more. A
-- plain bucket's 'w r' pays for none of it but a test or two (its
-- tonumber succeeds where an extended value's fails); a decision of a
-- bucket with reservations reads and writes their records whole (bytes in
-- proportion to them). Records live and expire with the TAT itself, so
-- they cannot outlive it or be lost while it stands. Every sum stays below
-- 2^53 as the TAT's do: a record's terms add at most n * wq ticks, and a
-- settle's extra is added in parts (gcra.owe). internal/meter's reserved
-- (reserved.go) says why this is exact.
--
-- A give-back that moves the TAT back (gcra.settle) marks the bucket: ' g'
-- and a time in whole µs after the value ('w r g5000'), the TAT it had
-- before, rounded up (the latest of such TATs). Each process' copy of the
-- bucket (mirror.go) is made from Redis' replies, which round its TAT up to
-- a whole µs, so no copy is later than the mark while it stands, unless
-- the copy holds what a give-back took back; once the mark has passed,
-- every copy is a full bucket or holds nothing given back. While it
-- stands (given > now), the process' own count holds no call back, and the
-- reply carries the mark (see decide.lua), so that the process takes
-- Redis' TAT for its own. Every write keeps the key until the mark passes
-- (a settle's KEEPTTL keeps an expiry past the TAT it moves back); a
-- decision or a write-back that finds it passed drops it; a loss of Redis'
-- data takes it with the bucket.

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
expression given as the piece's argument, for the rq in rq, and ext, its
outstanding reservations (nil for a plain bucket; see gcra.ext). A
remainder kept for another rate (a changed rule) is cut to fit: the TAT
moves by less than 1µs, as internal/meter's Bucket.Fit does. */}}
{{- define "gcra.state" -}}
local stored = redis.call('GET', {{.}})
local w, r, ext, given = 0, 0, nil, 0
if stored then
  local gs = string.find(stored, ' g', 1, true)
  if gs then
    given = tonumber(string.sub(stored, gs + 2))
    stored = string.sub(stored, 1, gs - 1)
  end
  local sp = string.find(stored, ' ', 1, true)
  if sp then
    w, r = tonumber(string.sub(stored, 1, sp - 1)), tonumber(string.sub(stored, sp + 1))
    if not r then
      {{template "gcra.ext"}}
    end
  else
    w = tonumber(stored)
  end
  if r > rq - 1 then
    r = rq - 1
  end
end
{{- end}}

{{/* gcra.ext reads a bucket with outstanding reservations (stored): its
TAT (w, r), and ext, its main sequence (mw, mr; cw, cr) and the records as
they are stored (rest), remainders cut as gcra.state cuts r. */}}
{{- define "gcra.ext" -}}
local a, b, c, d, e, f, rest = string.match(stored, '^(%-?%d+) (%d+) (%-?%d+) (%d+) (%-?%d+) (%d+)(.*)$')
w, r = tonumber(a), tonumber(b)
ext = {mw = tonumber(c), mr = math.min(tonumber(d), rq - 1), cw = tonumber(e), cr = math.min(tonumber(f), rq - 1), rest = rest}
{{- end}}

{{/* gcra.main puts a plain event costing cost ticks (below 2^53 - 2rq) at
the time at into ext's main sequence: max(main, at) + cost, and C*T +
cost. */}}
{{- define "gcra.main" -}}
local mw, mr = ext.mw, ext.mr
if mw < at then
  mw, mr = at, 0
end
local s = mr + cost
local q = gcra_div(s, rq)
ext.mw, ext.mr = mw + q, s - q * rq
s = ext.cr + cost
q = gcra_div(s, rq)
ext.cw, ext.cr = ext.cw + q, s - q * rq
{{- end}}

{{/* gcra.read: besides the TAT, the ticks owed at now (debt) and the tokens
in use, ceil(debt / wq) (used). When the TAT lies further ahead than any
allowed call leaves it (a clock gone backwards), debt is nil and the bucket
counts as full, and nothing that could overflow is computed. */}}
{{- define "gcra.read" -}}
{{template "gcra.state" "key"}}
if given <= now then
  given = 0
end
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

{{/* gcra.given: a give-back moved the TAT back, and a copy of the bucket
made before it may still hold what it gave back (see decide.lua). */}}
{{- define "gcra.given"}}given > 0{{end}}

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

{{/* gcra.record takes n tokens at now, writes the TAT and sets reset: as a
reservation in Reserve's variant (gcra.hold), as a plain event otherwise.
A full bucket (debt 0: TAT <= now) forgets its reservations. */}}
{{- define "gcra.record" -}}
if ext and debt == 0 then
  ext = nil
end
{{- if .Reserve}}
local hold_id, hold_at = ARGV[#ARGV], now
{{template "gcra.hold"}}
{{- else}}
if ext then
  local at, cost = now, n * wq
  {{template "gcra.main"}}
end
{{- end}}
local ticks = debt + n * wq
local q = gcra_div(ticks, rq)
w, r = now + q, ticks - q * rq
{{template "gcra.reset"}}
{{template "gcra.value"}}
redis.call('SET', key, tat, 'PX', {{template "ttl.arg" "math.max(reset, given - now)"}})
{{- end}}

{{/* gcra.pending: what gcra.record will set reset to. */}}
{{- define "gcra.pending" -}}
reset = gcra_div(debt + n * wq + rq - 1, rq)
{{- end}}

{{- define "gcra.keep"}}wq = wq, rq = rq, debt = debt, ext = ext, given = given{{end}}
{{- define "gcra.restore" -}}
local wq, rq, debt, w, r, ext, given = p.wq, p.rq, p.debt, 0, 0, p.ext, p.given
{{- end}}

{{/* gcra.hold keeps the record of a reservation of n tokens at hold_at
under the id hold_id (the Reserve variant of allow.lua: at now, its id
the last ARGV; a grant: see gcra.take), before the TAT takes them as
AllowN's would: the bucket's main sequence is its TAT when it had no
reservation outstanding. Its presence tells allow.lua that the kind keeps
the record in its meter. */}}
{{- define "gcra.hold" -}}
if not ext then
  ext = {mw = w, mr = r, cw = 0, cr = 0, rest = ''}
end
local xw, xr = ext.mw, ext.mr
if xw < hold_at then
  xw, xr = hold_at, 0
end
ext.rest = ext.rest .. '|' .. hold_id .. string.format(' %d %d %d %d %d', xw, xr, ext.cw, ext.cr, n)
{{- end}}

{{/* gcra.value declares tat, the TAT (w, r) as the bucket's STRING holds
it. */}}
{{- define "gcra.value" -}}
local tat
if ext then
  tat = string.format('%d %d %d %d %d %d', w, r, ext.mw, ext.mr, ext.cw, ext.cr) .. ext.rest
elseif r == 0 then
  tat = string.format('%d', w)
else
  tat = string.format('%d %d', w, r)
end
if given > 0 then
  tat = tat .. string.format(' g%d', given)
end
{{- end}}

{{/* gcra.owe adds n tokens taken at the time at without Redis
(writeback.lua, and a settle's extra): their cost is added to the TAT (w,
r) as of at, max(TAT, at) + n * wq ticks, however far ahead of now that
leaves it (a full bucket then counts as full until time catches up; see
gcra.read), in parts of at most most tokens, so that every sum stays below
2^53 (n may be many buckets' worth). Tokens owed in stamp order move the
TAT as the bucket that allowed them moved its own. They are plain events
of the main sequence (ext); a bucket full at at forgets its reservations
(see gcra.record). The caller writes the TAT. */}}
{{- define "gcra.owe" -}}
if ext and (w < at or (w == at and r == 0)) then
  ext = nil
end
if w < at then
  w, r = at, 0
end
local left = n
while left > 0 do
  local part = math.min(left, most)
  local cost = part * wq
  local ticks = r + cost
  local q = gcra_div(ticks, rq)
  w, r = w + q, ticks - q * rq
  if ext then
    {{template "gcra.main"}}
  end
  left = left - part
end
{{- end}}

{{/* gcra.undo settles the reservation whose id is ARGV[1] (undo.lua): n of
its tokens go back (gcra.settle). A bucket without it (settled before, full
since, lost by Redis) gives nothing back. */}}
{{- define "gcra.undo" -}}
local wq, rq = tonumber(ARGV[3]), tonumber(ARGV[4])
{{template "gcra.div"}}
{{template "gcra.give" "ARGV[1]"}}
{{- end}}

{{/* gcra.give settles the reservation whose id is the Lua expression
given as the piece's argument, giving n of its tokens back, and writes the
bucket (see gcra.undo). */}}
{{- define "gcra.give" -}}
{{template "gcra.state" "key"}}
if ext then
  local settle_id = {{.}}
  {{template "gcra.settle"}}
end
{{- end}}

{{/* gcra.settle gives back n of the tokens the outstanding reservation
settle_id took (n = 0 settles it at its cost), as internal/meter's
Bucket.Settle does: the reservation joins the main sequence at its actual cost a = n_i -
n, main = max(main, x_i + a*T + (C - C_i)), each later record j moves to
x_j = max(x_j, x_i + a*T + (C_j - C_i)) and C_j + a*T, C to C + a*T; then
the TAT is the main sequence's with the records left chained after it in
order, never later than it was. The key keeps its expiry (the TAT moves
back, if at all). Sets back, the tokens given back. The functions are
this script's own: it is no decision. */}}
{{- define "gcra.settle" -}}
local function shift(aw, ar, bw, br, cw, cr, k)
  local s = ar + br - cr + k
  local q
  if s >= 0 then
    q = gcra_div(s, rq)
  else
    q = -gcra_div(rq - 1 - s, rq)
  end
  return aw + bw - cw + q, s - q * rq
end
local function later(aw, ar, bw, br)
  if aw < bw or (aw == bw and ar < br) then
    return bw, br
  end
  return aw, ar
end
local out, found = {}, nil
for id, xw, xr, cw, cr, m in string.gmatch(ext.rest, '|([^ |]+) (%-?%d+) (%d+) (%-?%d+) (%d+) (%d+)') do
  out[#out + 1] = {id = id, xw = tonumber(xw), xr = math.min(tonumber(xr), rq - 1), cw = tonumber(cw), cr = math.min(tonumber(cr), rq - 1), n = tonumber(m)}
  if id == settle_id then
    found = #out
  end
end
if found then
  local o = table.remove(out, found)
  back = math.min(n, o.n)
  local cost = (o.n - back) * wq
  ext.mw, ext.mr = later(ext.mw, ext.mr, shift(o.xw, o.xr, ext.cw, ext.cr, o.cw, o.cr, cost))
  for j = found, #out do
    local p = out[j]
    p.xw, p.xr = later(p.xw, p.xr, shift(o.xw, o.xr, p.cw, p.cr, o.cw, o.cr, cost))
    p.cw, p.cr = shift(p.cw, p.cr, 0, 0, 0, 0, cost)
  end
  ext.cw, ext.cr = shift(ext.cw, ext.cr, 0, 0, 0, 0, cost)
  local tw, tr = ext.mw, ext.mr
  if #out == 0 then
    ext = nil
  else
    local p = out[1]
    local xw, xr = p.xw, p.xr
    for j = 2, #out do
      local q = out[j]
      xw, xr = later(q.xw, q.xr, shift(xw, xr, q.cw, q.cr, p.cw, p.cr, p.n * wq))
      p = q
    end
    tw, tr = later(tw, tr, shift(xw, xr, ext.cw, ext.cr, p.cw, p.cr, p.n * wq))
    local parts = {}
    for j = 1, #out do
      local q = out[j]
      parts[j] = string.format('|%s %d %d %d %d %d', q.id, q.xw, q.xr, q.cw, q.cr, q.n)
    end
    ext.rest = table.concat(parts)
  end
  if tw < w or (tw == w and tr < r) then
    local until_full = w
    if r > 0 then
      until_full = w + 1
    end
    given = math.max(given, until_full)
    w, r = tw, tr
  end
  {{template "gcra.value"}}
  redis.call('SET', key, tat, 'KEEPTTL')
end
{{- end}}

{{/* gcra.writeback adds what is owed whatever the bucket holds (no
burst), skipping stamps older than the oldest that still counts. */}}
{{- define "gcra.writeback" -}}
local now, due = tonumber(ARGV[11]), tonumber(ARGV[12])
local wq, rq = tonumber(ARGV[13]), tonumber(ARGV[14])
{{template "gcra.div"}}
{{template "gcra.state" "key"}}
local most = gcra_div(4503599627370496, wq)
for i = first, last, 2 do
  local at = tonumber(ARGV[i])
  if at >= due then
    local n = tonumber(ARGV[i + 1])
    {{template "gcra.owe"}}
  end
end
local reset
{{template "gcra.reset"}}
if given <= now then
  given = 0
end
if reset > 0 then
  {{template "gcra.value"}}
  redis.call('SET', key, tat, 'PX', {{template "ttl.arg" "math.max(reset, given - now)"}})
end
{{- end}}

{{/* gcra.prelude: the function the bucket's pieces call. */}}
{{- define "gcra.prelude"}}{{template "gcra.div"}}{{end}}

{{/* gcra.free, gcra.take and gcra.giveback are the bucket's pieces of
grant.lua. A grant at now takes g tokens as events at now + prefetch would
(its slots are used before then), and only if they fit at now (they may be
used from now): the TAT becomes max(TAT, now + prefetch) + g * T, and the
grant is made only if that TAT - T - now <= tau (debt + g * wq <= burst *
wq for debt = max(the bucket's debt at now, prefetch * rq)). Every slot's
use at s in [now, now + prefetch) then leaves the TAT no later than s +
burst * T, and after at least as many T as events since, as an allowed
call at s does: the GCRA's bound holds across any mix of grants and calls.
The grant is a reservation at now + prefetch (gcra.hold), so that what a
process gives back is exact: the bucket settles it at what was used
(gcra.settle), as if the grant had taken only that; a bucket that filled
since, or was Reset or lost, holds no record and gives nothing back. What
a grant took for prefetch when the bucket had been emptier than that
(max(TAT, now + prefetch)) stays taken: the price of the bound. */}}
{{- define "gcra.free" -}}
{{template "gcra.read"}}
local held = debt
if held then
  held = math.max(held, prefetch * rq)
  count = gcra_div(held + wq - 1, wq)
else
  count = rate
end
{{- end}}

{{- define "gcra.take" -}}
if ext and debt == 0 then
  ext = nil
end
local n, hold_id, hold_at = g, id, now + prefetch
{{template "gcra.hold"}}
local ticks = held + g * wq
local q = gcra_div(ticks, rq)
w, r = now + q, ticks - q * rq
local reset
{{template "gcra.reset"}}
{{template "gcra.value"}}
redis.call('SET', key, tat, 'PX', {{template "ttl.arg" "math.max(reset, given - now)"}})
empty = reset
{{- end}}

{{/* gcra.pace: a bucket that granted less than was asked refills at one
token each T; the next request waits prefetch, and finds what refilled
meanwhile (see grant.lua): waiting only until the tokens asked for are
free had each of a fleet's instances ask every few ms for a few tokens. */}}
{{- define "gcra.pace" -}}
pace = prefetch
{{- end}}

{{- define "gcra.giveback" -}}
local n, back = back_n, 0
{{template "gcra.give" "back_id"}}
{{- end}}
