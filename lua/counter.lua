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
-- (decide.lua) needs of it, as log_meter does for an exact log; win is the
-- index of the window that events recorded now go into.
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

  local function reset_in()
    if c > 0 then
      return (w + 2) * window - now
    elseif p > 0 then
      return (w + 1) * window - now
    end
    return 0
  end

  return {
    count = function()
      local frac = (window - elapsed) / window
      return math.ceil(p * frac + c)
    end,
    -- retry: how long until est + asked <= rate.
    retry = function(_, asked)
      local need = rate - asked
      if need < 0 then
        return window
      end
      local at
      if c <= need then
        at = w * window + (window - (need - c) * window / p)
      else
        at = (w + 1) * window + (window - need * window / c)
      end
      local retry = math.ceil(at - now)
      if retry < 1 then
        retry = 1
      end
      return retry
    end,
    reset = reset_in,
    -- prune does nothing: the counter moves to a new window only when it
    -- records events there.
    prune = function() end,
    add = function(n)
      c = c + n
      redis.call('HSET', key, 'w', string.format('%d', w), 'c', string.format('%d', c), 'p', string.format('%d', p))
      redis.call('PEXPIRE', key, math.ceil(2 * window / 1000) + 1000)
      return reset_in()
    end,
    win = w,
  }
end
