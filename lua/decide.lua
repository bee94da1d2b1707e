-- decide.lua: one (rule, key) pair's decision, the same for every kind of
-- meter (sliding.lua, counter.lua, gcra.lua, quota.lua), with the ladder of
-- penalty.lua when the rule has one. local.go decides the same way on the
-- local path.
--
-- A banned key is rejected without touching its events or violations. A
-- call for n events is allowed when count + n <= rate; a rejection is a
-- violation under a penalty: from warn_after violations on it carries a
-- warning, at ban_after the key is banned. n = 0 peeks: it answers for one
-- event and records nothing.
--
-- The calling process adds what it knows of the pair (see mirror.go's
-- hold), and may deliver violations it counted itself (strikes, the last
-- at struck: the shield's answers under a penalty), which count as if
-- Redis had counted them then: held, how long until its own count has room for the call (0: it
-- has; otherwise the call is rejected as a full meter would reject it),
-- owed, events it allowed without Redis that Redis has not been sent yet
-- (they count on top of the meter's count), and ban_left, a ban it knows
-- of (it bans the key as a ban of Redis' own would, without writing it:
-- the write-back does; but a call that records writes it where Redis holds
-- no ban, since Redis then lost its data and nothing else would). The process' own count and ban are void when the
-- pair was Reset (reset.lua wrote its time under tomb) since since, the
-- oldest event that count holds: Redis alone then decides. Only then does
-- the decision read tomb, so a call whose process adds nothing costs no
-- more.
--
-- A kind whose process' own count is a copy of Redis' (see mirror.go: a
-- calendar quota, a fixed window, a GCRA bucket) cannot tell, in that process, a copy made
-- before another process gave events back (a Reservation settled for less,
-- an AllowAll pair taken back) from Redis' state: the copy keeps the larger
-- count (a bucket: the later TAT). Such a kind marks a count a give-back
-- took from (its <kind>.given piece; a bucket's mark stands until the TAT
-- it had before the give-back, which no copy can pass), and the process' own count does not hold a call back while the
-- mark stands: Redis, which holds the count since the give-back, decides
-- alone (a loss of Redis' data takes the mark with it, and the process' own
-- count then holds calls back again), and the reply carries the mark (see
-- decide.given), so that the process takes Redis' count for its own.
--
-- A piece of the scripts' templates (see remote.go and now.lua), composed
-- for one kind and with or without a penalty: the kind's pieces are put in
-- by name (the template function kind, given "count", puts in
-- sliding.count for a sliding log), so a script never asks which kind it
-- decides, and nothing is a function.
--
-- The decision reads the locals now, key (the meter's key), pen, tomb,
-- rate, n, held, owed, ban_left, since, strikes and struck, the kind's own (its args and
-- read pieces declare them) and, with a penalty, penalty.args' memory (the
-- ladder's other numbers are read where a call climbs it). It declares
-- ok (1 or 0), count (the events in the window after the call), retry (µs
-- until the same call could pass, 0 when allowed), reset (µs until the
-- meter is empty), allows (whether the call allows events: never a peek)
-- and, with a penalty, v, flags (1 warned, 2 banned), banned_for (µs the
-- ban has left), memory_left (µs the violations are remembered) and k (the
-- bans remembered with them). Within a group (Group) it records nothing:
-- group.lua records once every rule allows.
--
-- Every kind has these pieces, which read the locals above:
--   <kind>.args     declares the kind's arguments from .Second and .Fifth,
--                   Lua expressions of ARGV[2] and ARGV[5] (allow.lua's)
--   <kind>.read     reads the meter at now
--   <kind>.count    sets count, the meter's events at now (a sliding log
--                   trims here when the call can record)
--   <kind>.retry    sets retry: how long until asked + owed events fit
--   <kind>.reset    sets reset: how long until the meter holds no events
--   <kind>.record   records n events at now and sets reset
--   <kind>.pending  sets reset to what record will (a group's decision)
--   <kind>.keep, <kind>.restore  (kinds a group holds) carry what record
--                   needs, in a group's table p, to its recording

{{- define "decide" -}}
if held > 0 or ban_left > 0 then
  local reset_at = redis.call('GET', tomb)
  if reset_at and tonumber(reset_at) >= since then
    held, ban_left = 0, 0
  end
end
{{- if has "given" .}}
if held > 0 and {{kind "given" .}} then
  held = 0
end
{{- end}}
{{- if .Penalty}}
{{template "penalty.read"}}
if strikes > 0 then
  {{template "penalty.deliver"}}
end
{{template "penalty.forget" "now"}}
local memory_left = 0
if v > 0 then
  memory_left = last + memory - now
end
if ban_left > 0 and now + ban_left > ban_end then
  if ban_end <= now and n > 0 then
    -- Redis holds no ban where the process knows of one: it lost its data
    -- (a restart without persistence, a FLUSHALL). On record again, the
    -- ban holds for every process.
    {{template "penalty.ban" "now + ban_left"}}
  end
  ban_end = now + ban_left
end
{{- end}}
local asked = math.max(n, 1)
local count
{{kind "count" .}}
count = count + owed
local ok, retry, reset, allows = 1, 0, 0, false
{{- if .Penalty}}
local flags, banned_for = 0, 0
{{- end}}
local fits = {{if .Penalty}}ban_end <= now and {{end}}count + asked <= rate and held == 0
if fits and n > 0 then
  allows = true
  {{if .Group}}{{kind "pending" .}}{{else}}{{kind "record" .}}{{end}}
  count = count + n
else
  {{kind "reset" .}}
  if not fits then
    ok = 0
    if count + asked > rate then
      {{kind "retry" .}}
    end
    if held > retry then
      retry = held
    end
{{- if .Penalty}}
    if ban_end > now then
      banned_for = ban_end - now
      retry = math.max(retry, banned_for)
      flags = 2
    elseif n == 0 then
      {{template "penalty.ladder" .}}
      if warn_after > 0 and v >= warn_after then
        flags = 1
      end
    else
      {{template "penalty.violate" .}}
      retry = math.max(retry, banned_for)
      memory_left = memory
    end
{{- end}}
  end
end
{{- end}}

{{/* decide.marked reads a count stored after its first space, at sp, in
stored ('x c', or 'x c g' once a give-back took events from it: see
above) into c, and its mark into given ('' or ' g'): a quota's and a
fixed window's. */}}
{{- define "decide.marked" -}}
local mark = string.find(stored, ' ', sp + 1, true)
if mark then
  c, given = tonumber(string.sub(stored, sp + 1, mark - 1)), ' g'
else
  c = tonumber(string.sub(stored, sp + 1))
end
{{- end}}

{{/* decide.given marks a count a give-back took from (its kind's
<kind>.given) in the reply: count becomes -1 - count, which Go reads back
(remote.go's decision.unmark) and then takes Redis' count for the
process' own, instead of the larger of the two. */}}
{{- define "decide.given" -}}
if {{kind "given" .}} then
  count = -1 - count
end
{{- end}}

{{/* decide.locals makes the globals a decision uses locals of the script:
a local costs Redis less to reach than a global, every time (about 2% of a
decision, counted with callgrind). */}}
{{- define "decide.locals" -}}
local KEYS, ARGV, redis, tonumber, string, math = KEYS, ARGV, redis, tonumber, string, math
{{- end}}
