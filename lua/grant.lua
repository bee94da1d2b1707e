-- grant.lua: takes slots of a pair's meter ahead of a process' calls, for
-- a rule with Prefetch (see prefetch.go), and gives back what the process
-- did not use of its earlier grants. An entry of the scripts' templates
-- (see remote.go and now.lua), composed for one kind with its pieces
-- <kind>.free, <kind>.take and <kind>.giveback (a kind without them takes
-- no Prefetch).
--
-- At now, g slots are granted only if what the meter counts, as a decision
-- at now counts it, and g fit within rate, and the slots are taken so that
-- every use the process makes of them, before its grant's end (the time it
-- sent the request plus usable), is counted as no earlier than it happened:
-- an exact log stamps them now + prefetch (future stamps of other grants
-- count as sliding.lua counts them); the counts of a fixed window, a quota
-- and an approximate counter take them in now's window or period, usable
-- until it ends. A give-back can only lower later counts. Each kind's
-- file says why its pieces are exact.
--
-- KEYS[1]  the meter (see allow.lua).
-- KEYS[2]  the time of the pair's last Reset (see reset.lua): a give-back
--          of a kind whose slots have no member of their own takes back
--          only while it names the Reset the grant saw.
-- KEYS[3]  the rule's penalty state (see penalty.lua), when it has one: a
--          banned key is granted nothing.
-- ARGV[1]  now in µs, or '' to read Redis' TIME (never '' for a quota).
-- ARGV[2]  the kind's first number, as allow.lua's ARGV[2].
-- ARGV[3]  rate.
-- ARGV[4]  g: the slots asked for (0: only give back).
-- ARGV[5]  the kind's second number, as allow.lua's ARGV[5] (a log's: the
--          member id of this grant's slots, id:1 .. id:g; a weighted
--          log's: its one member is id#g, see weighted.lua).
-- ARGV[6]  prefetch in µs.
-- ARGV[7]  the live instances: a grant is at most what is free divided by
--          them (at least 1), so that no instance holds more than its part.
-- ARGV[8]  what the meter does not hold and a decision counts on top of
--          it (the process' events not written back yet, the fleet's
--          reserve: see allow.lua's owed).
-- ARGV[9]  this grant's id (a log's: its members are id:1 .. id:g; a
--          weighted log's: id#g).
-- ARGV[10] least: the events of the call that asks (0 for a request no
--          call waits on): fewer slots than that serve it nothing, so that
--          a request finds none free until that many are (what a rejection
--          of that many events answers), and the process takes no slot it
--          would hold unused while its call goes to Redis.
-- ARGV[11..] fives of what the process gives back of its earlier grants
--          of the pair: a grant's id, the first and last of its slots it
--          did not use, the pair's last Reset when it was granted, and
--          where its slots went (the kind's giveback reads the locals
--          back_id, back_from, back_to, back_n and back_at). Nothing is
--          given back after another Reset: the meter it was taken from is
--          gone.
--
-- Returns {granted, count, now, usable, at, mark, empty, pace}: the slots
-- granted, the events the meter counted before them, the time they were
-- granted at, µs from then they may be used, where they went (the kind's:
-- a window's or a period's index), the pair's last Reset, µs from then
-- until the meter is empty if nothing else comes (an allowed call's
-- ResetAfter), and µs from then before the next request is worth making
-- (0: at once): a meter that frees room continuously (a bucket, an
-- approximate counter; its <kind>.pace piece) sets it when it granted less
-- than was asked, so that the next request finds more than the little
-- freed since, instead of the fleet's instances each taking that little
-- with a script, and no earlier than one more event fits (the kind's
-- retry); {0, count, now, retry, reset}
-- when fewer slots than least were free for a request of some: µs until
-- least free and until the meter is empty, what a rejection of least
-- events answers (the kind's retry and reset); {0, count, now} otherwise
-- (nothing asked, or a ban).
{{- define "grant" -}}
{{template "decide.locals"}}
{{template "now" "ARGV[1]"}}
local key, tomb = KEYS[1], KEYS[2]
local rate, g = tonumber(ARGV[3]), tonumber(ARGV[4])
local prefetch, instances, owed = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local id = ARGV[9]
local least = math.max(1, tonumber(ARGV[10]))
{{kind "args" .}}
{{- if has "prelude" .}}
{{kind "prelude" .}}
{{- end}}
local mark = redis.call('GET', tomb) or '0'
for j = 11, #ARGV, 5 do
  local back_id, back_from, back_to, back_mark, back_at = ARGV[j], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), ARGV[j + 3], ARGV[j + 4]
  local back_n = back_to - back_from + 1
  if back_mark == mark then
    {{kind "giveback" .}}
  end
end
if KEYS[3] then
  local ban_end = tonumber(redis.call('HGET', KEYS[3], 'b')) or 0
  if ban_end > now then
    return {0, 0, now}
  end
end
local count = 0
{{kind "free" .}}
count = count + owed
local free = rate - count
if g <= 0 then
  return {0, count, now}
end
if free < least then
  local asked, retry, reset = least, 0, 0
  {{kind "retry" .}}
  {{kind "reset" .}}
  return {0, count, now, retry, reset}
end
local want = g
g = math.min(g, free, math.max(least, math.floor(free / instances)))
local usable, at, empty, pace = prefetch, 0, 0, 0
{{kind "take" .}}
{{- if has "pace" .}}
if g < want then
  {{kind "pace" .}}
  local asked, retry = 1, 0
  {{kind "retry" .}}
  pace = math.max(pace, retry)
end
{{- end}}
return {g, count, now, usable, at, tonumber(mark), empty, pace}
{{- end}}
