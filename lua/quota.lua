-- quota.lua: the calendar quota of one (rule, key) pair (Kind
-- CalendarQuota): the events of the current period. A piece the Go side
-- composes into scripts (see remote.go) after now.lua; it defines functions
-- and no entry point. Lua has no time zones: Go computes the period's
-- bounds from the call's time and passes them. quota.go keeps the same two
-- numbers on the local path.
--
-- The quota is a STRING 'start count': the start of the period (µs) the
-- count belongs to, and the count. A count of another period counts as 0.
-- It expires a second after its period ends.

-- quota_meter reads the quota of the period [start, finish) at now and
-- returns what decide (decide.lua) needs to know of it.
local function quota_meter(key, now, start, finish)
  local v = redis.call('GET', key)
  local c = 0
  if v then
    local sp = string.find(v, ' ', 1, true)
    if sp and tonumber(string.sub(v, 1, sp - 1)) == start then
      c = tonumber(string.sub(v, sp + 1))
    end
  end
  return {quota = key, now = now, start = start, finish = finish, c = c}
end

-- quota_reset returns how long until the period ends, 0 when it holds no
-- events.
local function quota_reset(m)
  if m.c > 0 then
    return m.finish - m.now
  end
  return 0
end

-- quota_add records n events in the period and returns how long until it
-- ends.
local function quota_add(m, n)
  m.c = m.c + n
  local left = m.finish - m.now
  redis.call('SET', m.quota, string.format('%d %d', m.start, m.c), 'PX', math.ceil(left / 1000) + 1000)
  return left
end
