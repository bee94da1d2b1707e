-- group.lua: several rules whose keys share one hash tag (Limiter.AllowGroup),
-- decided in one run: the request is allowed, and every rule records its
-- events, only if every rule allows it. Rules are asked in order; the first
-- that rejects stops the run (counting its violation, as penalty.lua does),
-- and nothing is recorded. A rule in dry run reports its rejection without
-- stopping the others, and records nothing.
--
-- KEYS[2i-1], KEYS[2i]  rule i's log (ZSET) and penalty state (HASH).
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  m: how many rules.
-- ARGV[3 + 12(i-1)] ...  rule i's window, rate, n, member id, penalize (1
--          or 0), dry run (1 or 0), then its penalty's six arguments (see
--          strikes.lua's penalty_args).
--
-- Returns nine numbers per rule asked, as penalty.lua returns them: for
-- every rule when the request is allowed, up to the rejecting rule
-- otherwise.
local now = now_us(ARGV[1])
local m = tonumber(ARGV[2])
local out = {}
local passed = {}

local function push(...)
  for _, x in ipairs({...}) do
    out[#out + 1] = x
  end
end

for i = 1, m do
  local a = 3 + 12 * (i - 1)
  local log, pen = KEYS[2 * i - 1], KEYS[2 * i]
  local window, rate, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local penalize, dry = ARGV[a + 4] == '1', ARGV[a + 5] == '1'
  local v, ban_end, memory_left, k = 0, 0, 0, 0
  local pa
  if penalize then
    pa = penalty_args(a + 6)
    v, ban_end, memory_left, k = load_strikes(pen, now, pa.memory)
  end
  local stop = false
  if ban_end > now then
    local count = live_count(log, now, window)
    local ban_left = ban_end - now
    push(0, count, math.max(retry_after(log, now, window, rate, count, n), ban_left),
      reset_after(log, now, window), v, 2, ban_left, memory_left, k)
    stop = true
  else
    trim(log, now, window)
    local count = live_count(log, now, window)
    if count + n <= rate then
      passed[#passed + 1] = {log = log, window = window, n = n, id = ARGV[a + 3]}
      push(1, count + n, 0, window, v, 0, 0, memory_left, k)
    else
      local retry = retry_after(log, now, window, rate, count, n)
      local reset = reset_after(log, now, window)
      if penalize then
        local flags, ban_left
        v, flags, ban_left, k = violate(pen, now, v, k, pa)
        push(0, count, math.max(retry, ban_left), reset, v, flags, ban_left, pa.memory, k)
      else
        push(0, count, retry, reset, 0, 0, 0, 0, 0)
      end
      stop = true
    end
  end
  if stop and not dry then
    return out
  end
end

for _, r in ipairs(passed) do
  record(r.log, now, r.window, r.n, r.id)
end
return out
