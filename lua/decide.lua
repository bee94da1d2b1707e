-- decide.lua: one (rule, key) pair's decision, the same for an exact log
-- (log_meter, window.lua) and an approximate counter (counter_meter,
-- counter.lua), with the penalty ladder of strikes.lua when the rule has
-- one. A piece the Go side composes into scripts (see remote.go); it
-- defines functions and no entry point. local.go decides the same way on
-- the local path.
--
-- A banned key is rejected without touching its events or violations. A
-- call for n events is allowed when count + n <= rate; a rejection is a
-- violation under a penalty: from warn_after violations on it carries a
-- warning, at ban_after the key is banned. n = 0 peeks: it answers for one
-- event and records nothing.

-- decide decides n events of the pair whose meter is m, at now, under rate;
-- pen and pa are the penalty state's key and arguments (penalty_args), nil
-- for a rule without penalty. With commit it records the events it allows;
-- without, the caller records them later with m.add (AllowGroup records
-- only once every pair allows).
--
-- It returns the reply {allowed, count, retry_us, reset_us, violations,
-- flags, ban_left_us, memory_left_us, bans}: allowed 1 or 0; count the
-- events in the window after the call; retry_us how long until the same
-- call could pass (0 when allowed); reset_us how long until the window is
-- empty; the violations remembered, flags (1 warned, 2 banned), how long the
-- ban has left, how long the violations are remembered and the bans
-- remembered with them (all 0 without penalty). Its second result says
-- whether the call allows events (never for a peek).
local function decide(m, pen, now, rate, n, pa, commit)
  local v, ban_end, memory_left, k = 0, 0, 0, 0
  if pa then
    v, ban_end, memory_left, k = load_strikes(pen, now, pa.memory)
  end
  local asked = math.max(n, 1)
  if ban_end > now then
    local count = m.count()
    local ban_left = ban_end - now
    local retry = ban_left
    if count + asked > rate then
      retry = math.max(m.retry(count, asked), ban_left)
    end
    return {0, count, retry, m.reset(), v, 2, ban_left, memory_left, k}, false
  end
  if n > 0 then
    m.prune()
  end
  local count = m.count()
  if count + asked <= rate then
    if n == 0 then
      return {1, count, 0, m.reset(), v, 0, 0, memory_left, k}, false
    end
    local reset = m.added
    if commit then
      reset = m.add(n)
    end
    return {1, count + n, 0, reset, v, 0, 0, memory_left, k}, true
  end
  local retry = m.retry(count, asked)
  local reset = m.reset()
  if not pa or n == 0 then
    local flags = 0
    if n == 0 and pa and pa.warn_after > 0 and v >= pa.warn_after then
      flags = 1
    end
    return {0, count, retry, reset, v, flags, 0, memory_left, k}, false
  end
  local flags, ban_left
  v, flags, ban_left, k = violate(pen, now, v, k, pa)
  return {0, count, math.max(retry, ban_left), reset, v, flags, ban_left, pa.memory, k}, false
end
