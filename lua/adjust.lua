-- adjust.lua: changes to a GCRA bucket (gcra.lua) or a calendar quota
-- (quota.lua) made outside a decision: giving back what an undone call took
-- (undo.lua) and adding what was decided without Redis (writeback.lua). A
-- piece the Go side composes into those scripts after gcra.lua and
-- quota.lua (see remote.go); it defines functions and no entry point. It is
-- apart from gcra.lua and quota.lua because every function a script holds is
-- a closure Redis creates on every call, and a decision needs none of these.

-- gcra_give_back returns n tokens taken earlier (undo.lua): the TAT moves
-- back by n * wq ticks, whatever the time. It returns n, or 0 for a bucket
-- that is gone.
local function gcra_give_back(m, n)
  if redis.call('EXISTS', m.gcra) == 0 then
    return 0
  end
  local back = n * m.wq
  local q = gcra_div(back, m.rq)
  m.w, m.r = m.w - q, m.r - (back - q * m.rq)
  if m.r < 0 then
    m.w, m.r = m.w - 1, m.r + m.rq
  end
  gcra_store(m, nil)
  return n
end

-- gcra_owe adds n tokens taken at the time at without Redis (writeback.lua):
-- their cost is added to the TAT as of at, max(TAT, at) + n * wq ticks,
-- however far ahead of now that leaves it (a full bucket then counts as
-- full until time catches up; see gcra_meter). Tokens owed in stamp order
-- move the TAT as the bucket that allowed them moved its own. The caller
-- stores the TAT (gcra_store).
local function gcra_owe(m, at, n)
  if m.w < at then
    m.w, m.r = at, 0
  end
  local ticks = m.r + n * m.wq
  local q = gcra_div(ticks, m.rq)
  m.w, m.r = m.w + q, ticks - q * m.rq
end

-- quota_take_back takes back up to n events recorded in the meter's period
-- (undo.lua), keeping the key's expiry, and returns how many.
local function quota_take_back(m, n)
  local back = math.min(m.c, n)
  if back > 0 then
    m.c = m.c - back
    redis.call('SET', m.quota, string.format('%d %d', m.start, m.c), 'KEEPTTL')
  end
  return back
end

-- quota_owe adds n events counted without Redis (writeback.lua) in the
-- meter's period, unless Redis holds a later period already, and keeps the
-- quota until a second after the period ends. The meter is read at a time
-- inside the period.
local function quota_owe(m, n)
  local v = redis.call('GET', m.quota)
  if v then
    local sp = string.find(v, ' ', 1, true)
    if sp and tonumber(string.sub(v, 1, sp - 1)) > m.start then
      return
    end
  end
  quota_add(m, n)
end
