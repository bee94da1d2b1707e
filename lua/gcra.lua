-- gcra.lua: the GCRA bucket of one (rule, key) pair (Kind GCRA), a token
-- bucket kept as its theoretical arrival time (TAT): the time the bucket is
-- full again. A piece the Go side composes into scripts (see remote.go)
-- after now.lua; it defines functions and no entry point. gcra.go keeps the
-- same numbers on the local path and computes the same integers.
--
-- The emission interval T = window / rate is normalised by their gcd into
-- wq / rq (µs), so that it is exact: time is counted in ticks of 1/rq µs,
-- one event costs wq ticks and a full bucket holds burst * wq. The TAT is
-- w whole µs plus r ticks (0 <= r < rq), kept in a STRING 'w r' ('w' when r
-- is 0) that expires when the bucket is full (plus a second). At now the
-- bucket owes debt = max(0, (w - now) * rq + r) ticks; n events fit when
-- count + n <= burst for count = ceil(debt / wq), the tokens in use, which
-- is debt + n * wq <= burst * wq. Every product stays below 2^53 (Go checks
-- the rule), so doubles compute them exactly; gcra_div divides exactly.

-- gcra_div returns floor(a / b) for integers a >= 0, b >= 1 below 2^53,
-- correcting the double division's rounding.
local function gcra_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- gcra_meter reads the bucket at now and returns what decide (decide.lua)
-- needs to know of it: besides the TAT (w, r), the ticks owed at now (debt)
-- and the tokens in use, ceil(debt / wq) (count), computed here once. A
-- remainder kept for another rate (a changed rule) is cut to fit: the TAT
-- moves by less than 1µs, as gcra.go does. When the TAT lies further ahead
-- than any allowed call leaves it (a clock gone backwards), debt is nil and
-- the bucket counts as full, and nothing that could overflow is computed.
-- Every function below is one the script's calls use: the pieces a script
-- composes are closures created on every call, so gcra_give_back and
-- gcra_owe (undo.lua, writeback.lua) live in adjust.lua.
local function gcra_meter(key, now, wq, rq, burst)
  local v = redis.call('GET', key)
  local w, r = 0, 0
  if v then
    local sp = string.find(v, ' ', 1, true)
    if sp then
      w, r = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
    else
      w = tonumber(v)
    end
    if r > rq - 1 then
      r = rq - 1
    end
  end
  local debt, count = 0, 0
  local d = w - now
  if d > 0 or (d == 0 and r > 0) then
    if d > gcra_div(burst * wq, rq) + 1 then
      debt, count = nil, burst
    else
      debt = d * rq + r
      count = gcra_div(debt + wq - 1, wq)
    end
  end
  return {gcra = key, now = now, wq = wq, rq = rq, burst = burst, w = w, r = r, debt = debt, count = count}
end

-- gcra_retry returns how long until asked tokens are free:
-- ceil((debt + asked * wq - burst * wq) / rq), from w, so that a clock gone
-- backwards cannot overflow it.
local function gcra_retry(m, asked)
  local d, r = m.w - m.now, m.r
  if d < 0 then
    d, r = 0, 0
  end
  local x = r + (asked - m.burst) * m.wq
  local up
  if x >= 0 then
    up = gcra_div(x + m.rq - 1, m.rq)
  else
    up = -gcra_div(-x, m.rq)
  end
  local retry = d + up
  if retry < 1 then
    retry = 1
  end
  return retry
end

-- gcra_reset returns how long until the bucket is full: until the TAT,
-- rounded up to a whole µs.
local function gcra_reset(m)
  local d = m.w - m.now
  if d < 0 or (d == 0 and m.r == 0) then
    return 0
  end
  if m.r > 0 then
    return d + 1
  end
  return d
end

-- gcra_full_after returns how long until the bucket is full once n more
-- tokens are taken at now: what gcra_add answers.
local function gcra_full_after(m, n)
  local debt = m.debt + n * m.wq
  return gcra_div(debt + m.rq - 1, m.rq)
end

-- gcra_store writes the TAT: expiring px ms from now, or keeping the key's
-- expiry when px is nil.
local function gcra_store(m, px)
  local v
  if m.r == 0 then
    v = string.format('%d', m.w)
  else
    v = string.format('%d %d', m.w, m.r)
  end
  if px then
    redis.call('SET', m.gcra, v, 'PX', px)
  else
    redis.call('SET', m.gcra, v, 'KEEPTTL')
  end
end

-- gcra_add takes n tokens at now and returns how long until the bucket is
-- full.
local function gcra_add(m, n)
  local debt = m.debt + n * m.wq
  local q = gcra_div(debt, m.rq)
  m.w, m.r = m.now + q, debt - q * m.rq
  local reset = gcra_reset(m)
  gcra_store(m, math.ceil(reset / 1000) + 1000)
  return reset
end
