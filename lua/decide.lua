-- decide.lua: one (rule, key) pair's decision, the same for an exact log
-- (log_meter, window.lua), an approximate counter (counter_meter,
-- counter.lua), a GCRA bucket (gcra_meter, gcra.lua) and a calendar quota
-- (quota_meter, quota.lua), with the penalty ladder of strikes.lua when the
-- rule has one. A piece the Go side composes into scripts (see remote.go); it
-- defines functions and no entry point. local.go decides the same way on
-- the local path.
--
-- A banned key is rejected without touching its events or violations. A
-- call for n events is allowed when count + n <= rate; a rejection is a
-- violation under a penalty: from warn_after violations on it carries a
-- warning, at ban_after the key is banned. n = 0 peeks: it answers for one
-- event and records nothing.
--
-- The calling process adds what it knows of the pair (see mirror.go's
-- hold): held, how long until its own count has room for the call (0: it
-- has; otherwise the call is rejected as a full meter would reject it),
-- owed, events it allowed without Redis that Redis has not been sent yet
-- (they count on top of the meter's count), and ban_left, a ban it knows
-- of (it bans the key as a ban of Redis' own would, without writing it:
-- the write-back does). The process' own count and ban are void when the
-- pair was Reset (reset.lua wrote its time under tomb) since since, the
-- oldest event that count holds: Redis alone then decides. Only then does
-- decide read tomb, so a call whose process adds nothing costs no more.

-- decide calls a meter's functions only for that kind of meter (it tells
-- them apart by their tables' fields) and strikes.lua's only with a
-- penalty, so a script composes just the pieces its calls use: every
-- function a script defines costs Redis a closure on every call (about as
-- much as a redis.call of PING when it refers to other functions), which is
-- why what only decide needs is a code path in it rather than a function.

-- decide_record records n events in the meter m at now and returns how
-- long until it holds no events.
local function decide_record(m, now, n)
  if m.log then
    record(m.log, now, m.window, n, m.id)
    return m.window -- an exact log is empty a window after its newest event
  elseif m.gcra then
    return gcra_add(m, n)
  elseif m.quota then
    return quota_add(m, n)
  end
  return counter_add(m, n)
end

-- decide decides n events of the pair whose meter is m, at now, under rate;
-- pen and pa are the penalty state's key and arguments (penalty_args), nil
-- for a rule without penalty (then strikes.lua need not be composed in);
-- held, owed, ban_left, tomb and since are the caller's (see above).
-- With commit it records the events it allows; without, the caller records
-- them later with record (AllowGroup records only once every pair allows).
--
-- It returns the reply {allowed, count, retry_us, reset_us, violations,
-- flags, ban_left_us, memory_left_us, bans}: allowed 1 or 0; count the
-- events in the window after the call; retry_us how long until the same
-- call could pass (0 when allowed); reset_us how long until the window is
-- empty; the violations remembered, flags (1 warned, 2 banned), how long the
-- ban has left, how long the violations are remembered and the bans
-- remembered with them (all 0 without penalty). Its second result says
-- whether the call allows events (never for a peek).
local function decide(m, pen, now, rate, n, pa, commit, held, owed, ban_left, tomb, since)
  local log = m.log
  if held > 0 or ban_left > 0 then
    local reset = redis.call('GET', tomb)
    if reset and tonumber(reset) >= since then
      held, ban_left = 0, 0
    end
  end
  local v, ban_end, memory_left, k = 0, 0, 0, 0
  if pa then
    v, ban_end, memory_left, k = load_strikes(pen, now, pa.memory)
    if ban_left > 0 and now + ban_left > ban_end then
      ban_end = now + ban_left
    end
  end
  local asked = math.max(n, 1)
  local count
  if log then
    -- A call that can record trims first (a counter has nothing to
    -- prune); then, with Redis' TIME, everything left is live.
    local trimmed = ban_end <= now and n > 0
    if trimmed then
      trim(log, now, m.window, m.card)
    end
    count = live_count(log, now, m.window, m.card and trimmed)
  elseif m.gcra then
    count = m.count
  elseif m.quota then
    count = m.c
  else
    count = counter_count(m)
  end
  count = count + owed
  local fits = ban_end <= now and count + asked <= rate and held == 0
  if fits and n > 0 then
    local reset
    if commit then
      reset = decide_record(m, now, n)
    elseif m.gcra then -- what recording will answer (see record's callers)
      reset = gcra_full_after(m, n)
    elseif m.quota then
      reset = m.finish - now
    else
      reset = m.window
    end
    return {1, count + n, 0, reset, v, 0, 0, memory_left, k}, true
  end
  -- How long until the meter holds no events.
  local reset
  if log then
    reset = reset_after(log, now, m.window)
  elseif m.gcra then
    reset = gcra_reset(m)
  elseif m.quota then
    reset = quota_reset(m)
  else
    reset = counter_reset(m)
  end
  if fits then -- a peek that would pass
    return {1, count, 0, reset, v, 0, 0, memory_left, k}, false
  end
  local retry = 0
  if count + asked > rate then
    if log then
      retry = retry_after(log, now, m.window, rate, count - owed, asked + owed)
    elseif m.gcra then
      retry = gcra_retry(m, asked + owed)
    elseif m.quota then
      retry = m.finish - now
    else
      retry = counter_retry(m, asked + owed)
    end
  end
  if held > retry then
    retry = held
  end
  if ban_end > now then
    local ban_left = ban_end - now
    return {0, count, math.max(retry, ban_left), reset, v, 2, ban_left, memory_left, k}, false
  end
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
