-- allow.lua: decides one call of Limiter.Allow, AllowN or Peek. An entry of
-- the scripts' templates (see remote.go and now.lua), composed for one kind
-- of rule and with or without its penalty: one flat body, now.lua's time,
-- the kind's arguments and read, and decide.lua's decision.
--
-- KEYS[1]  the rule's events: an exact log (a ZSET of events scored by
--          their time in µs, key ending in 'l', see sliding.lua), an
--          approximate counter ('c', see counter.lua), a GCRA bucket ('g',
--          see gcra.lua) or a calendar quota ('q', see quota.lua).
-- KEYS[2]  the rule's penalty state (see penalty.lua); unused for a rule
--          without penalty.
-- KEYS[3]  the time of the pair's last Reset (see reset.lua); only when the
--          process holds the call back (ARGV[6] or ARGV[8] not 0), and
--          always for a concurrency rule (the pair's mark, see
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
-- ARGV[6]  held: µs until the calling process' own count has room for the
--          call (0: it has; see decide.lua).
-- ARGV[7]  owed: events the process allowed without Redis that Redis does
--          not hold yet.
-- ARGV[8]  µs left of a ban the process knows of (0: none).
-- ARGV[9]  since: the oldest event the process' own count holds, in µs
--          (0: not known; see decide.lua).
-- ARGV[10]..ARGV[15]  with a penalty: warn_after (0: no warning stage),
--          ban_after (>= 1), ban_for (µs), memory (µs), growth of each
--          further ban (1: every ban lasts ban_for), max_ban (µs).
-- ARGV[10] on, or ARGV[16] on with a penalty: a concurrency rule's
--          Acquire sends the leases its process holds on Redis, a pair
--          each (its time, its id), put back when Redis lost them (see
--          concurrency.lua).
--
-- Returns {allowed, count, retry_us, reset_us, violations, flags,
-- ban_left_us, memory_left_us, bans} (see decide.lua's locals ok, count,
-- retry, reset, v, flags, banned_for, memory_left, k), or only the first
-- four when the other five are 0: always for a rule without penalty, and
-- for a key with no violation on record and no ban (Go reads them as 0:
-- every number sent costs Redis about 480 instructions); for a counter one
-- more: the index of the fixed window events recorded by this call went
-- into (now / window), which undo.lua needs.

{{- define "allow" -}}
{{template "decide.locals"}}
{{template "now" "ARGV[1]"}}
local key, pen, tomb = KEYS[1], KEYS[2], KEYS[3]
local rate, n = tonumber(ARGV[3]), tonumber(ARGV[4])
{{/* Most calls' process adds nothing (held, owed and ban_left '0'): comparing
interned strings costs Redis less than four conversions (~2.8k of ~89k
instructions, callgrind); since only matters beside one of them. */}}
local held, owed, ban_left, since = 0, 0, 0, 0
if ARGV[6] ~= '0' or ARGV[7] ~= '0' or ARGV[8] ~= '0' then
  held, owed, ban_left, since = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
end
{{kind "args" .}}
{{- if .Penalty}}
{{template "penalty.args" .}}
{{- end}}
{{- if eq .Kind "gcra"}}
{{template "gcra.div"}}
{{- end}}
{{kind "read" .}}
{{template "decide" .}}
{{- if .Penalty}}
if v == 0 and flags == 0 and k == 0 then
  return {ok, count, retry, reset{{if eq .Kind "counter"}}, w{{end}}}
end
{{- end}}
return {ok, count, retry, reset{{if .Penalty}}, v, flags, banned_for, memory_left, k{{end}}{{if eq .Kind "counter"}}, w{{end}}}
{{- end}}
