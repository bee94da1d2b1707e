-- grant.lua: takes slots of an exact sliding log (Kind SlidingLog) ahead
-- of a process' calls, for a rule with Prefetch (see prefetch.go), and
-- gives back what the process did not use of its last grant. An entry of
-- the scripts' templates (see remote.go and now.lua).
--
-- At now, g slots are granted only if the events the log counts (those
-- stamped after now - window, future stamps of other grants included) and
-- g fit within rate, and they are stamped now + prefetch: every use the
-- process makes of them happens before its grant's end, sent before now,
-- plus prefetch, so that no slot is stamped earlier than its use, and the
-- log counts it at least a window after. The log's expiry (ttl.lua's
-- second beyond the window, refreshed by every call) outlives the stamps:
-- prefetch is at most 500 ms. A removal only lowers later counts.
--
-- KEYS[1]  the log (see sliding.lua).
-- KEYS[2]  the rule's penalty state (see penalty.lua), when it has one: a
--          banned key is granted nothing.
-- ARGV[1]  now in µs, or '' to read Redis' TIME.
-- ARGV[2]  window in µs.
-- ARGV[3]  rate.
-- ARGV[4]  g: the slots asked for.
-- ARGV[5]  prefetch in µs.
-- ARGV[6]  the live instances: a grant is at most what is free divided by
--          them (at least 1), so that no instance holds more than its part.
-- ARGV[7]  the member id of this grant's slots: id:1 .. id:g.
-- ARGV[8]  what the log does not hold and a decision counts on top of it
--          (the process' events not written back yet, the fleet's
--          reserve: see allow.lua's owed).
-- ARGV[9..] triples of what the process gives back of its earlier grants
--          of the pair: a grant's member id, and the first and last of its
--          slots it did not use.
--
-- Returns {granted, count, now}: the slots granted, the events the log
-- counted before them, and the time they were granted at; and when no
-- slot was free for a request of some, {0, count, now, retry, reset}: µs
-- until the first slot frees and until the log is empty, what a rejection
-- of one event answers (sliding.retry, sliding.reset).
{{- define "grant" -}}
{{template "now" "ARGV[1]"}}
local key = KEYS[1]
local window, rate, g = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local prefetch, instances, id = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
for j = 9, #ARGV, 3 do
  local last, from, to = ARGV[j], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
  local batch = {}
  for i = from, to do
    batch[#batch + 1] = last .. string.format(':%d', i)
    if #batch >= 2000 or i == to then
      redis.call('ZREM', key, unpack(batch))
      batch = {}
    end
  end
end
if KEYS[2] then
  local ban_end = tonumber(redis.call('HGET', KEYS[2], 'b')) or 0
  if ban_end > now then
    return {0, 0, now}
  end
end
local keep = window
if stamp then
  keep = 2 * window
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - keep))
local count = redis.call('ZCOUNT', key, string.format('(%d', now - window), '+inf') + tonumber(ARGV[8])
local free = rate - count
if g <= 0 then
  return {0, count, now}
end
if free <= 0 then
  local owed, asked, retry, reset = tonumber(ARGV[8]), 1
  {{template "sliding.retry"}}
  {{template "sliding.reset"}}
  return {0, count, now, retry, reset}
end
g = math.min(g, free, math.max(1, math.floor(free / instances)))
local at = string.format('%d', now + prefetch)
local batch = {}
for i = 1, g do
  batch[#batch + 1] = at
  batch[#batch + 1] = id .. string.format(':%d', i)
  if #batch >= 2000 or i == g then
    redis.call('ZADD', key, unpack(batch))
    batch = {}
  end
end
redis.call('PEXPIRE', key, {{template "ttl.arg" "window + prefetch"}})
return {g, count, now}
{{- end}}
