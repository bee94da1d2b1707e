-- counter.lua: the approximate sliding-window counter of one (rule, key)
-- pair, for rules that opt into it (Rule.Approximate). A piece the Go side
-- composes into scripts (see remote.go); it defines functions and no entry
-- point. Time is cut into fixed windows of the rule's length; the count at
-- now is estimated as the current window's events plus the previous
-- window's, weighted by how much of the previous window the sliding window
-- still covers: est = prev * ((window - elapsed) / window) + cur. Memory is
-- O(1) per key. counter.go computes the same numbers with the same
-- operations in the same order, so both paths decide alike.
--
-- The counter is a HASH with w (index of the current fixed window, now /
-- window), c (its events) and p (the previous one's).

-- counter_meter reads the counter at now and returns what decide
-- (decide.lua) needs to know of it, as log_meter does for an exact log;
-- win is the index of the window events recorded now go into.
local function counter_meter(key, now, window, rate)
  local state = redis.call('HMGET', key, 'w', 'c', 'p')
  local w = tonumber(state[1]) or 0
  local c = tonumber(state[2]) or 0
  local p = tonumber(state[3]) or 0
  local idx = math.floor(now / window)
  if idx > w then
    if idx == w + 1 then
      p = c
    else
      p = 0
    end
    c = 0
    w = idx
  end
  local elapsed = now - w * window
  if elapsed < 0 then
    elapsed = 0
  end
  return {counter = key, now = now, window = window, rate = rate, win = w, c = c, p = p, elapsed = elapsed}
end

-- counter_count returns the estimate, rounded up.
local function counter_count(m)
  local frac = (m.window - m.elapsed) / m.window
  return math.ceil(m.p * frac + m.c)
end

-- counter_retry returns how long until est + asked <= rate.
local function counter_retry(m, asked)
  local window, w, c, p = m.window, m.win, m.c, m.p
  local need = m.rate - asked
  if need < 0 then
    return window
  end
  local at
  if c <= need then
    at = w * window + (window - (need - c) * window / p)
  else
    at = (w + 1) * window + (window - need * window / c)
  end
  local retry = math.ceil(at - m.now)
  if retry < 1 then
    retry = 1
  end
  return retry
end

-- counter_reset returns how long until the counter is empty.
local function counter_reset(m)
  if m.c > 0 then
    return (m.win + 2) * m.window - m.now
  elseif m.p > 0 then
    return (m.win + 1) * m.window - m.now
  end
  return 0
end

-- counter_add records n events in the current window and returns how long
-- until the counter is empty.
local function counter_add(m, n)
  m.c = m.c + n
  redis.call('HSET', m.counter, 'w', string.format('%d', m.win), 'c', string.format('%d', m.c), 'p', string.format('%d', m.p))
  redis.call('PEXPIRE', m.counter, math.ceil(2 * m.window / 1000) + 1000)
  return counter_reset(m)
end
