-- undo.lua: takes back the events one allowed call recorded, when AllowAll
-- denies the request at a later rule, or this process' own count overrules
-- what Redis allowed.
--
-- KEYS[1]  the rule's log (a ZSET) or approximate counter (a HASH).
-- ARGV[1]  'l' for a log, 'c' for a counter.
-- ARGV[2]  the call's member id (as allow.lua got it).
-- ARGV[3]  n: the events the call recorded.
-- ARGV[4]  for a counter: the index of the fixed window the events went
--          into (approx.lua's tenth number). Once the counter has moved to
--          another window they are no longer its current count, and nothing
--          is taken back, as counter.go's local path does.
--
-- Returns the events taken back.
local key = KEYS[1]
local n = tonumber(ARGV[3])
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
