-- undo.lua: takes back the events one allowed call recorded, when AllowAll
-- denies the request at a later rule, or this process' own count overrules
-- what Redis allowed.
--
-- KEYS[1]  the rule's log (a ZSET), approximate counter (a HASH), GCRA
--          bucket or quota (STRINGs).
-- ARGV[1]  'l' for a log, 'c' for a counter, 'g' for a bucket, 'q' for a
--          quota.
-- ARGV[2]  the call's member id (as allow.lua got it).
-- ARGV[3]  n: the events the call recorded.
-- ARGV[4]  for a counter: the index of the fixed window the events went
--          into (approx.lua's tenth number). Once the counter has moved to
--          another window they are no longer its current count, and nothing
--          is taken back, as counter.go's local path does. For a quota: the
--          start of the period the events went into, likewise. For a
--          bucket: wq, the cost of one event in ticks (see gcra.lua).
-- ARGV[5]  for a bucket: rq, ticks per µs.
--
-- Returns the events taken back.
local key = KEYS[1]
local n = tonumber(ARGV[3])
if ARGV[1] == 'g' then
  -- The TAT moves back by n * wq ticks; the key keeps its expiry.
  local v = redis.call('GET', key)
  if not v then
    return 0
  end
  local wq, rq = tonumber(ARGV[4]), tonumber(ARGV[5])
  local w, r = tonumber(v), 0
  local sp = string.find(v, ' ', 1, true)
  if sp then
    w, r = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
  end
  local back = n * wq
  local q = math.floor(back / rq)
  if q * rq > back then
    q = q - 1
  elseif (q + 1) * rq <= back then
    q = q + 1
  end
  w, r = w - q, r - (back - q * rq)
  if r < 0 then
    r, w = r + rq, w - 1
  end
  if r == 0 then
    v = string.format('%d', w)
  else
    v = string.format('%d %d', w, r)
  end
  redis.call('SET', key, v, 'KEEPTTL')
  return n
end
if ARGV[1] == 'q' then
  local v = redis.call('GET', key)
  local sp = v and string.find(v, ' ', 1, true)
  if not sp or tonumber(string.sub(v, 1, sp - 1)) ~= tonumber(ARGV[4]) then
    return 0
  end
  local c = tonumber(string.sub(v, sp + 1))
  local back = math.min(c, n)
  if back > 0 then
    redis.call('SET', key, string.format('%s %d', string.sub(v, 1, sp - 1), c - back), 'KEEPTTL')
  end
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
