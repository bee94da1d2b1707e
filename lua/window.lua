-- window.lua: the exact sliding-window log of one (rule, key) pair, a ZSET
-- of events scored by their time. A piece the Go side composes into
-- scripts (see remote.go) after now.lua; it defines functions and no entry
-- point.
--
-- Every time is a whole number of microseconds since the Unix epoch. Numbers
-- that go into a key, a member or a score are formatted with '%d', never with
-- tostring or '..': real Redis prints Lua numbers as '%.14g', which turns a
-- microsecond timestamp into '1.7953441438916e+15'.

-- live_min is the ZSET score range bound that excludes events that have left
-- the window: an event at t0 counts at now while now - t0 < window.
local function live_min(now, window)
  return string.format('(%d', now - window)
end

-- live_count counts the events still in the window. When the script reads
-- Redis' own TIME (card), calls reach the log in the order of their times,
-- trim keeps nothing older than the window, and ZCARD counts the same
-- events as ZCOUNT, for less.
local function live_count(log, now, window, card)
  if card then
    return redis.call('ZCARD', log)
  end
  return redis.call('ZCOUNT', log, live_min(now, window), '+inf')
end

-- retry_after returns how long until enough events leave the window for n
-- more to fit (0 when they fit now). When the k-th oldest live event leaves,
-- at most rate - n remain.
local function retry_after(log, now, window, rate, count, n)
  local k = count + n - rate
  if k <= 0 then
    return 0
  end
  if n > rate then
    return window
  end
  local r = redis.call('ZRANGEBYSCORE', log, live_min(now, window), '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
  return tonumber(r[2]) + window - now
end

-- reset_after returns how long until the window holds no events.
local function reset_after(log, now, window)
  local r = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  if r[2] == nil then
    return 0
  end
  local left = tonumber(r[2]) + window - now
  if left < 0 then
    return 0
  end
  return left
end

-- record adds n events at now with distinct members: the caller's id (random
-- per Limiter, then a per-Limiter counter), and for n > 1 a ':' and the
-- event's index; and keeps the log one window and a second past its newest
-- event. It trims nothing: trim does.
local function record(log, now, window, n, id)
  if n == 1 then
    redis.call('ZADD', log, now, id)
  else
    local batch = {}
    for i = 1, n do
      batch[#batch + 1] = now
      batch[#batch + 1] = id .. string.format(':%d', i)
      if #batch >= 2000 or i == n then
        redis.call('ZADD', log, unpack(batch))
        batch = {}
      end
    end
  end
  redis.call('PEXPIRE', log, math.ceil(window / 1000) + 1000)
end

-- trim removes the events no later call can count. Counting goes by score
-- (live_count), so trimming only bounds memory. With a clock of the
-- caller's (ARGV[1] not empty) it keeps one more window than counting
-- needs, so that a call stamped up to a window earlier than calls already
-- decided (concurrent callers with a Clock of their own reach Redis in any
-- order) still counts every event it should. With Redis' TIME (card) calls
-- come in the order of their times, and it keeps just the window.
local function trim(log, now, window, card)
  local keep = 2 * window
  if card then
    keep = window
  end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%d', now - keep))
end

-- log_meter is what decide (decide.lua) needs to know of an exact log: a
-- plain table (decide tells it from a counter by its log field), so that a
-- call creates no closures for it.
local function log_meter(log, now, window, rate, id, card)
  return {log = log, now = now, window = window, rate = rate, id = id, card = card}
end
