-- undo.lua: takes back the events one allowed call recorded, when AllowAll
-- denies the request at a later rule. An entry of the scripts' templates
-- (see remote.go and now.lua), with gcra.lua's and quota.lua's pieces that
-- take back.
--
-- KEYS[1]  the rule's log (a ZSET), approximate counter (a HASH), GCRA
--          bucket or quota (STRINGs).
-- ARGV[1]  'l' for a log, 'c' for a counter, 'g' for a bucket, 'q' for a
--          quota.
-- ARGV[2]  the call's member id (as allow.lua got it).
-- ARGV[3]  n: the events the call recorded.
-- ARGV[4]  for a counter: the index of the fixed window the events went
--          into (allow.lua's last number). Once the counter has moved to
--          another window they are no longer its current count, and nothing
--          is taken back, as counter.go's local path does. For a quota: the
--          start of the period the events went into, likewise. For a
--          bucket: wq, the cost of one event in ticks (see gcra.lua).
-- ARGV[5]  for a bucket: rq, ticks per µs.
--
-- Returns the events taken back.
{{- define "undo" -}}
local key = KEYS[1]
local n = tonumber(ARGV[3])
if ARGV[1] == 'g' then
  local wq, rq = tonumber(ARGV[4]), tonumber(ARGV[5])
  {{template "gcra.div"}}
  {{template "gcra.state" "key"}}
  if redis.call('EXISTS', key) == 0 then
    return 0
  end
  {{template "gcra.give_back"}}
  return n
end
if ARGV[1] == 'q' then
  local start = tonumber(ARGV[4])
  {{template "quota.state" "key"}}
  {{template "quota.take_back"}}
  return back
end
if ARGV[1] == 'c' then
  local state = redis.call('HMGET', key, 'w', 'c')
  local c = tonumber(state[2]) or 0
  if tonumber(state[1]) ~= tonumber(ARGV[4]) then
    return 0
  end
  local back = math.min(c, n)
  if back > 0 then
    redis.call('HSET', key, 'c', string.format('%d', c - back))
  end
  return back
end
if n == 1 then
  return redis.call('ZREM', key, ARGV[2])
end
local back = 0
local batch = {}
for i = 1, n do
  batch[#batch + 1] = ARGV[2] .. string.format(':%d', i)
  if #batch >= 2000 or i == n then
    back = back + redis.call('ZREM', key, unpack(batch))
    batch = {}
  end
end
return back
{{- end}}
