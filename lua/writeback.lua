-- writeback.lua: writes back one batch of what a process decided without
-- Redis for one (rule, key) pair (see writeback.go): a Reset and a ban
-- Redis did not see, violations, and events. An entry of the scripts'
-- templates (see remote.go and now.lua), with the pieces of the kinds
-- (sliding.add, counter.roll, gcra.owe, quota.owe) and penalty.lua's that
-- write what the batch holds.
-- The batch is applied at most once: its id is remembered under KEYS[4] for ARGV[4] ms,
-- and a replay (a reply that was lost, and the batch sent again) finds it
-- and changes nothing.
--
-- Order within the batch: the Reset first (it removes only what was
-- recorded in the log before its time, so events recorded since, by this
-- batch or by calls Redis decided meanwhile, stay; the other kinds' state
-- has no times and goes whole), then the ban and the violations, then the
-- events.
--
-- KEYS[1]  the rule's log (a ZSET, see sliding.lua).
-- KEYS[2]  the rule's penalty state (see penalty.lua).
-- KEYS[3]  the rule's approximate counter (see counter.lua).
-- KEYS[4]  the batch's id: set once the batch is applied.
-- KEYS[5]  the rule's GCRA bucket (see gcra.lua).
-- KEYS[6]  the rule's calendar quota (see quota.lua).
-- KEYS[7]  the time of the pair's last Reset (see reset.lua).
-- ARGV[1]  the meter kind the events are for, the last letter of its key:
--          'l' the log, 'c' the counter, 'g' the bucket, 'q' the quota.
--          (A new meter kind adds a branch at the end.)
-- ARGV[2]  the batch id, the start of the members of its log events.
-- ARGV[3]  window in µs (a log's, a counter's).
-- ARGV[4]  how long KEYS[4] is kept, in ms.
-- ARGV[5]  '1' when a Reset made at ARGV[6] (µs) is to be applied.
-- ARGV[6]  the Reset's time, in µs.
-- ARGV[7]  the end of a ban decided without Redis, in µs (0: none).
-- ARGV[8]  violations counted without Redis.
-- ARGV[9]  bans the ladder started without Redis.
-- ARGV[10] the time of the last of those violations, in µs.
-- ARGV[11] how long violations are remembered, in µs.
-- ARGV[12] the writer's time, in µs, for the TTLs.
-- ARGV[13] the oldest stamp that still counts at the writer's time: the
--          bucket skips older ones (a batch sent again late).
-- ARGV[14], ARGV[15] the rule's numbers as allow.lua gets them: the
--          bucket's wq (ticks one event costs) and rq (ticks per µs); the
--          start and end of the quota's period at the writer's time, in µs;
--          a log's or counter's window and 0.
-- ARGV[16] m: how many pairs follow.
-- ARGV[17..16+2m] pairs of stamp and count, stamps ascending: for a log
--          and a bucket the events' time in µs, for a counter the index of
--          the fixed window they were counted in, for a quota the start of
--          their period. Their log members are made from the batch id.
-- ARGV[17+2m..] (a log only) triples of stamp, count and member id: events
--          of calls whose script may have run before they were decided
--          without Redis, recorded under the member the script got (as
--          sliding.lua's sliding.add does), so that Redis counts each once.
--
-- Returns 1 when the batch was applied, 0 when it had been already.
{{- define "writeback" -}}
local log, pen, counter, done, bucket, quota = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
if not redis.call('SET', done, '1', 'NX', 'PX', ARGV[4]) then
  return 0
end
local kind = ARGV[1]
local window = tonumber(ARGV[3])

if ARGV[5] == '1' then
  redis.call('ZREMRANGEBYSCORE', log, '-inf', '(' .. ARGV[6])
  redis.call('DEL', counter, bucket, quota, pen)
  redis.call('SET', KEYS[7], ARGV[6], 'PX', ARGV[4])
end

local banned_to = tonumber(ARGV[7])
local dv = tonumber(ARGV[8])
if banned_to > 0 or dv > 0 then
  {{template "penalty.read"}}
  local now = tonumber(ARGV[12])
  local keep = 0
  if dv > 0 then
    local at = tonumber(ARGV[10])
    local memory = tonumber(ARGV[11])
    {{template "penalty.forget" "at"}}
    v = v + dv
    k = k + tonumber(ARGV[9])
    if at > last then
      last = at
    end
    redis.call('HSET', pen, 'v', string.format('%d', v), 'l', string.format('%d', last), 'k', string.format('%d', k))
    keep = last + memory - now
  end
  if banned_to > ban_end then
    redis.call('HSET', pen, 'b', string.format('%d', banned_to))
    ban_end = banned_to
  end
  if ban_end - now > keep then
    keep = ban_end - now
  end
  keep = {{template "ttl" "keep"}}
  if redis.call('PTTL', pen) < keep then
    redis.call('PEXPIRE', pen, keep)
  end
end

local first = 17
local last = 16 + 2 * tonumber(ARGV[16])
if #ARGV == 16 then
  return 1
end
if kind == 'l' then
  -- record adds n events at now under the member id (sliding.add): the
  -- batch's events are many calls of it.
  local function record(key, now, window, n, id)
    {{template "sliding.add"}}
  end
  local j = 0
  for i = first, last, 2 do
    j = j + 1
    record(log, ARGV[i], window, tonumber(ARGV[i + 1]), ARGV[2] .. string.format('.%d', j))
  end
  for i = last + 1, #ARGV, 3 do
    record(log, ARGV[i], window, tonumber(ARGV[i + 1]), ARGV[i + 2])
  end
elseif kind == 'c' then
  {{template "counter.state" "counter"}}
  for i = first, last, 2 do
    local win = tonumber(ARGV[i])
    local n = tonumber(ARGV[i + 1])
    {{template "counter.roll" "win"}}
    if win == w then
      c = c + n
    elseif win == w - 1 then
      p = p + n
    end
  end
  redis.call('HSET', counter, 'w', string.format('%d', w), 'c', string.format('%d', c), 'p', string.format('%d', p))
  redis.call('PEXPIRE', counter, {{template "ttl" "2 * window"}})
elseif kind == 'g' then
  local now, due = tonumber(ARGV[12]), tonumber(ARGV[13])
  local key, wq, rq = bucket, tonumber(ARGV[14]), tonumber(ARGV[15])
  {{template "gcra.div"}}
  -- No burst: what is owed is added whatever the bucket holds.
  {{template "gcra.state" "key"}}
  for i = first, last, 2 do
    local at = tonumber(ARGV[i])
    if at >= due then
      local n = tonumber(ARGV[i + 1])
      {{template "gcra.owe"}}
    end
  end
  local reset
  {{template "gcra.reset"}}
  if reset > 0 then
    {{template "gcra.value"}}
    redis.call('SET', key, tat, 'PX', {{template "ttl" "reset"}})
  end
elseif kind == 'q' then
  local now, start, finish = tonumber(ARGV[12]), tonumber(ARGV[14]), tonumber(ARGV[15])
  local key = quota
  local n = 0
  for i = first, last, 2 do
    if tonumber(ARGV[i]) == start then
      n = n + tonumber(ARGV[i + 1])
    end
  end
  if n > 0 then
    {{template "quota.state" "key"}}
    {{template "quota.owe"}}
  end
end
return 1
{{- end}}
