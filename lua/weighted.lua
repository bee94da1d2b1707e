-- weighted.lua: the exact sliding log's Redis pieces (Kind SlidingLog, not
-- Approximate, with or without Prefetch; see weightedlog.go): sliding.lua's
-- log, in the same key (letter 'l'), where a Prefetch grant of g slots is
-- ONE member of weight g instead of g members, so that a grant costs Redis
-- O(1) whatever its size. A log without grants is read as sliding.lua
-- reads it, with one ZSCORE more (the sum's sentinel, absent).
--
-- The format. A call's events are members as in sliding.lua (id, id:i),
-- each of weight 1. A grant is the member <grant id>#<N> (N the slots it
-- holds), scored now + prefetch (see grant.lua). The sentinel member '#'
-- is scored 2^52 + S, where S is the sum of (N - 1) over the grant members
-- the key holds: the log's count is its members less the sentinel, plus
-- S. Scores are doubles, exact to 2^53; stamps in µs are below 2^52 until
-- 2112, so every range of stamps ('(' .. 2^52 at most) leaves the
-- sentinel out, and trims (by score, from -inf) never take it. The
-- sentinel is there only while S > 0. The key's PEXPIRE covers it, and a
-- Reset deletes the key and S with it (reset.lua). No member but the
-- sentinel holds '#' other than a grant's (ids are base64url, digits, ':'
-- and '.'), and a grant's weight is what follows its '#'.
--
-- Every piece that removes members by score first takes the grant members
-- among them out of S (weighted.tally, weighted.drop); a give-back turns
-- <id>#N into <id>#(N - n) at the same score (weighted.giveback). With
-- Redis' TIME (card) a call that trims trims at now - window and counts
-- with ZCARD and S: exact, O(1) amortised (each member is read once, when
-- it is trimmed, and only while S > 0). Otherwise (a clock of the caller's
-- keeps two windows; a peek or a banned call does not trim) the members at
-- or before now - window still in the key are not counted, and the grant
-- weight of the live ones is computed by walking the smaller of the two
-- ranges (O(its members): with Options.Clock, or for a peek, only while S
-- > 0).
--
-- Every piece not defined here is sliding.lua's: a call records, undoes
-- and writes back plain members as there.

{{- define "weighted.args"}}{{template "sliding.args" .}}{{end}}
{{- define "weighted.read"}}{{end}}

{{/* weighted.sum declares wsum, S (0 when there is no sentinel), and
wkeyed, whether the sentinel is there. */}}
{{- define "weighted.sum" -}}
local wsum, wkeyed = redis.call('ZSCORE', key, '#'), true
if wsum then
  wsum = tonumber(wsum) - 4503599627370496
else
  wsum, wkeyed = 0, false
end
{{- end}}

{{/* weighted.set writes S (wsum) into the sentinel, removing it at 0. */}}
{{- define "weighted.set" -}}
if wsum > 0 then
  redis.call('ZADD', key, string.format('%d', 4503599627370496 + wsum), '#')
  wkeyed = true
elseif wkeyed then
  redis.call('ZREM', key, '#')
  wkeyed = false
end
{{- end}}

{{/* weighted.walk sets w_got to the sum of (N - 1) over the grant members
of ranks w_lo .. w_hi (inclusive), read in batches. */}}
{{- define "weighted.walk" -}}
local w_got = 0
for w_at = w_lo, w_hi, 1000 do
  local ms = redis.call('ZRANGE', key, string.format('%d', w_at), string.format('%d', math.min(w_at + 999, w_hi)))
  for i = 1, #ms do
    local w = string.match(ms[i], '#(%d+)$')
    if w then
      w_got = w_got + tonumber(w) - 1
    end
  end
end
{{- end}}

{{/* weighted.trim removes the members scored at or before the bound
w_bound (a string) and takes the grants among them out of S. */}}
{{- define "weighted.trim" -}}
if wsum > 0 then
  local w_lo, w_hi = 0, redis.call('ZCOUNT', key, '-inf', w_bound) - 1
  {{template "weighted.walk"}}
  if w_got > 0 then
    wsum = wsum - w_got
    {{template "weighted.set"}}
  end
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', w_bound)
{{- end}}

{{/* weighted.tally trims as sliding.count does when trimmed says so (keep
one window with Redis' TIME, card, two with the caller's clock) and sets
count, the weight of the live members (scored after now - window), and,
when the log holds grants (wsum > 0), wfirst, the rank of the oldest live
member (weighted.retry reads it only then). */}}
{{- define "weighted.tally" -}}
{{template "weighted.sum"}}
if trimmed then
  local keep = 2 * window
  if card then
    keep = window
  end
  local w_bound = string.format('%d', now - keep)
  {{template "weighted.trim"}}
end
local wfirst = 0
if card and trimmed then
  count = redis.call('ZCARD', key) + wsum
  if wkeyed then
    count = count - 1
  end
else
  local live_from = string.format('%d', now - window)
  count = redis.call('ZCOUNT', key, '(' .. live_from, '(4503599627370496')
  if wsum > 0 then
    wfirst = redis.call('ZCOUNT', key, '-inf', live_from)
    if wfirst <= count then
      local w_lo, w_hi = 0, wfirst - 1
      {{template "weighted.walk"}}
      count = count + wsum - w_got
    else
      local w_lo, w_hi = wfirst, wfirst + count - 1
      {{template "weighted.walk"}}
      count = count + w_got
    end
  end
end
{{- end}}

{{- define "weighted.count" -}}
local trimmed = {{if .Penalty}}ban_end <= now and {{end}}n > 0
{{template "weighted.tally"}}
{{- end}}

{{/* weighted.retry: when the kth oldest unit of weight of the live
members leaves, at most rate - (asked + owed) of the log's own events
remain. Without grants it is sliding.retry; with them it walks the oldest
live members, summing their weights, in batches (growing from 16), at
most 10,000 members: past that it answers when the newest live member
leaves, later than the kth's, which is safe (a conservative retry). */}}
{{- define "weighted.retry" -}}
local kth = (count - owed) + (asked + owed) - rate
if kth <= 0 then
  retry = 0
elseif asked + owed > rate then
  retry = window
elseif wsum == 0 then
  local r = redis.call('ZRANGEBYSCORE', key, string.format('(%d', now - window), '+inf', 'WITHSCORES', 'LIMIT', kth - 1, 1)
  retry = tonumber(r[2]) + window - now
else
  local seen, at, batch, stop = 0, wfirst, 16, wfirst + 10000
  retry = nil
  while not retry and at < stop do
    local ms = redis.call('ZRANGE', key, string.format('%d', at), string.format('%d', at + batch - 1), 'WITHSCORES')
    if #ms == 0 then
      break
    end
    for i = 1, #ms, 2 do
      if ms[i] == '#' then
        break
      end
      local w = string.match(ms[i], '#(%d+)$')
      seen = seen + (w and tonumber(w) or 1)
      if seen >= kth then
        retry = tonumber(ms[i + 1]) + window - now
        break
      end
    end
    at = at + batch
    batch = math.min(2 * batch, 1000)
  end
  if not retry then
    local newest = redis.call('ZREVRANGEBYSCORE', key, '(4503599627370496', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    retry = window
    if newest[2] then
      retry = tonumber(newest[2]) + window - now
    end
  end
end
{{- end}}

{{/* weighted.reset: the newest member below the sentinel. */}}
{{- define "weighted.reset" -}}
local newest = redis.call('ZREVRANGEBYSCORE', key, '(4503599627370496', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
{{template "sliding.emptyIn"}}
{{- end}}

{{- define "weighted.record"}}{{template "sliding.record" .}}{{end}}
{{- define "weighted.short"}}{{template "sliding.short" .}}{{end}}
{{- define "weighted.pending"}}{{template "sliding.pending" .}}{{end}}
{{- define "weighted.keep"}}{{template "sliding.keep" .}}{{end}}
{{- define "weighted.restore"}}{{template "sliding.restore" .}}{{end}}
{{- define "weighted.undo"}}{{template "sliding.undo" .}}{{end}}
{{- define "weighted.writeback"}}{{template "sliding.writeback" .}}{{end}}

{{/* weighted.free, weighted.take and weighted.giveback are the log's
pieces of grant.lua, as sliding.lua's (which say why a grant is exact),
but for the weight: a grant is one member <id>#g at now + prefetch, and S
grows by g - 1. */}}
{{- define "weighted.free" -}}
local trimmed = true
{{template "weighted.tally"}}
{{- end}}

{{- define "weighted.take" -}}
redis.call('ZADD', key, string.format('%d', now + prefetch), id .. string.format('#%d', g))
if g > 1 then
  wsum = wsum + g - 1
  {{template "weighted.set"}}
end
redis.call('PEXPIRE', key, {{template "ttl.arg" "window + prefetch"}})
empty = window + prefetch
{{- end}}

{{/* weighted.giveback: the unused slots back_from .. back_to of grant
back_id are a suffix (back_to is the grant's size N): its member
back_id#N becomes back_id#(back_from - 1) at the same score, or goes when
that is 0, and S follows. A give-back sent again, or after a Reset, finds
no back_id#N and changes nothing. */}}
{{- define "weighted.giveback" -}}
local gone = back_id .. string.format('#%d', back_to)
local at = redis.call('ZSCORE', key, gone)
if at then
  redis.call('ZREM', key, gone)
  local dw = back_to - 1
  if back_from > 1 then
    redis.call('ZADD', key, at, back_id .. string.format('#%d', back_from - 1))
    dw = back_n
  end
  if dw > 0 then
    {{template "weighted.sum"}}
    wsum = wsum - dw
    {{template "weighted.set"}}
  end
end
{{- end}}

{{/* weighted.drop removes from the sorted set key the members scored
before the Lua expression given (a Reset's time, see writeback.lua), the
grant members among them out of S; a log without the sentinel is
trimmed as sliding.lua trims. */}}
{{- define "weighted.drop" -}}
do
  {{template "weighted.sum"}}
  local w_bound = '(' .. {{.}}
  {{template "weighted.trim"}}
end
{{- end}}
