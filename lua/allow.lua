-- allow.lua: decides one call of Limiter.Allow, AllowN or Peek. An entry of
-- the scripts' templates (see remote.go and now.lua), composed for one kind
-- of rule and with or without its penalty: one flat body, now.lua's time,
-- the kind's arguments and read, and decide.lua's decision.
--
-- KEYS[1]  the rule's events: an exact log (a ZSET of events scored by
--          their time in µs, a Prefetch grant one member of its weight,
--          key ending in 'l', see weighted.lua and sliding.lua), an
--          approximate counter ('c', see counter.lua), a GCRA bucket ('g',
--          see gcra.lua) or a calendar quota ('q', see quota.lua).
-- KEYS[2]  the rule's penalty state (see penalty.lua); only with a penalty,
--          or before KEYS[3].
-- KEYS[3]  the time of the pair's last Reset (see reset.lua); only when the
--          process holds the call back (ARGV[6]'s held or ban left not 0),
--          and always for a concurrency rule (the pair's mark, see
--          concurrency.lua).
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME (never ''
--          for a quota: Go computed its period from that time).
-- ARGV[2]  a log's or a counter's window in µs; a bucket's wq, the cost of
--          one event in ticks (Window / gcd(Window, Rate)); the start of a
--          quota's period, in µs.
-- ARGV[3]  rate: what count + n must not exceed: the events allowed in any
--          window, in a period, or a bucket's Burst.
-- ARGV[4]  n: events this call asks for; 0 peeks: answers for n = 1 and
--          records nothing.
-- ARGV[5]  a log's member id for this call (unique across processes and
--          calls); a bucket's rq, ticks per µs (Rate / gcd(Window, Rate));
--          the end of a quota's period, in µs; unused for a counter.
-- ARGV[6]  what the calling process' own count adds: '0' when nothing, as
--          for most calls (left out then when nothing follows it: a rule
--          without penalty or leases), and otherwise four or six numbers joined by ':'
--          (one argument instead of four saves Redis ~3.8k instructions a
--          call, callgrind): held, µs until the process' own count has room for
--          the call (0: it has; see decide.lua); owed, events the process
--          allowed without Redis that Redis does not hold yet; ban_left, µs
--          left of a ban the process knows of (0: none); since, the oldest
--          event the process' own count holds, in µs (0: not known; see
--          decide.lua); and only when the call delivers violations the
--          process counted itself (the shield's answers, see shield.go):
--          strikes, how many, and struck, the time of the last, in µs.
-- ARGV[7]  with a penalty: memory, µs violations are remembered.
-- ARGV[8]  with a penalty: the ladder, joined by ':': warn_after (0: no
--          warning stage), ban_after (>= 1), ban_for (µs), growth of each
--          further ban (1: every ban lasts ban_for), max_ban (µs).
-- ARGV[7] on, or ARGV[9] on with a penalty: a concurrency rule's
--          Acquire sends the leases its process holds on Redis, a pair
--          each (its time, its id), put back when Redis lost them (see
--          concurrency.lua).
-- With Reserve (a Limiter.Reserve of a kind whose events have no member
-- of their own: see reserve.go), KEYS[2] and KEYS[3] are always sent,
-- KEYS[4] is the reservation's record, ARGV[6] is always sent, and the
-- last ARGV is how long the record is kept, in ms: an allowing call sets
-- the record to the time of the pair's last Reset (tomb's value, '0' when
-- none), so that a settle gives back only what Redis recorded, and nothing
-- once a Reset has cleared it (undo.lua). A kind that keeps the record in
-- its meter instead (it has a <kind>.hold piece, which its record piece
-- puts in for Reserve: a GCRA bucket, see gcra.lua) gets no KEYS[4], and
-- the last ARGV is the reservation's id.
--
-- Returns {allowed, count, retry_us, reset_us, violations, flags,
-- ban_left_us, memory_left_us, bans} (see decide.lua's locals ok, count,
-- retry, reset, v, flags, banned_for, memory_left, k), or only the first
-- four when the other five are 0: always for a rule without penalty, and
-- for a key with no violation on record and no ban (Go reads them as 0:
-- every number sent costs Redis about 480 instructions); for a counter one
-- more: the index of the fixed window events recorded by this call went
-- into (now / window), which undo.lua needs. A kind whose allowing call's
-- retry and reset Go knows from the plan (<kind>.short: a sliding log's
-- are 0 and its window, a calendar quota's 0 and the end of its period) answers such a call, when the penalty's five are 0,
-- with one integer instead, count: an integer reply costs Redis less than
-- an array of four, and rueidis reads it without allocating. A count a
-- give-back took from (a quota's, a fixed window's or a bucket's mark, see
-- decide.lua) is answered as -1 - count, in either form.

{{- define "allow" -}}
{{template "decide.locals"}}
{{template "now" "ARGV[1]"}}
local key, pen, tomb = KEYS[1], KEYS[2], KEYS[3]
local rate, n = tonumber(ARGV[3]), 1
{{- /* n is '1' for most calls: a string comparison costs Redis less than
tonumber (two strtod calls, ~1.1k instructions). */}}
if ARGV[4] ~= '1' then
  n = tonumber(ARGV[4])
end
{{/* Most calls' process adds nothing: ARGV[6] is '0', and comparing an
interned string costs Redis less than any conversion. */}}
local held, owed, ban_left, since, strikes, struck = 0, 0, 0, 0, 0, 0
{{- if .Penalty}}
if ARGV[6] ~= '0' then
{{- else}}
local adds = ARGV[6]
if adds and adds ~= '0' then
{{- end}}
  local h, o, b, s, v, l = string.match(ARGV[6], '^(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+):?(%d*):?(%d*)$')
  held, owed, ban_left, since = tonumber(h), tonumber(o), tonumber(b), tonumber(s)
  strikes, struck = tonumber(v) or 0, tonumber(l) or 0
end
{{kind "args" .}}
{{- if .Penalty}}
{{template "penalty.args" .}}
{{- end}}
{{- if has "prelude" .}}
{{kind "prelude" .}}
{{- end}}
{{kind "read" .}}
{{template "decide" .}}
{{- if and .Reserve (not (has "hold" .))}}
if allows then
  redis.call('SET', KEYS[4], redis.call('GET', tomb) or '0', 'PX', ARGV[#ARGV])
end
{{- end}}
{{- if has "given" .}}
{{template "decide.given" .}}
{{- end}}
{{- if has "short" .}}
if allows{{if .Penalty}} and v == 0 and k == 0{{end}} then
  return {{kind "short" .}}
end
{{- end}}
{{- if .Penalty}}
if v == 0 and flags == 0 and k == 0 then
  return {ok, count, retry, reset{{if has "tail" .}}, {{kind "tail" .}}{{end}}}
end
{{- end}}
return {ok, count, retry, reset{{if .Penalty}}, v, flags, banned_for, memory_left, k{{end}}{{if has "tail" .}}, {{kind "tail" .}}{{end}}}
{{- end}}
