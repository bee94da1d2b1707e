-- undo.lua: takes back the events one allowed call recorded, when AllowAll
-- denies the request at a later rule.
--
-- KEYS[1]  the rule's log (a ZSET) or approximate counter (a HASH).
-- ARGV[1]  'l' for a log, 'c' for a counter.
-- ARGV[2]  the call's member id (as sliding.lua got it).
-- ARGV[3]  n: the events the call recorded.
--
-- Returns the events taken back.
local key = KEYS[1]
local n = tonumber(ARGV[3])
if ARGV[1] == 'c' then
  local c = tonumber(redis.call('HGET', key, 'c')) or 0
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
