-- group.lua: several rules whose keys share one hash tag (Limiter.AllowGroup),
-- decided in one run: the request is allowed, and every rule records its
-- events, only if every rule allows it. Rules are asked in order; the first
-- that rejects stops the run (counting its violation, as allow.lua does),
-- and nothing is recorded. A rule in dry run reports its rejection without
-- stopping the others, and records nothing. Composed after window.lua,
-- strikes.lua and decide.lua.
--
-- KEYS[2i-1], KEYS[2i]  rule i's log (ZSET) and penalty state (HASH).
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  m: how many rules.
-- ARGV[3 + 12(i-1)] ...  rule i's window, rate, n, member id, penalize (1
--          or 0), dry run (1 or 0), then its penalty's six arguments (see
--          strikes.lua's penalty_args).
--
-- Returns decide's nine numbers per rule asked: for every rule when the
-- request is allowed, up to the rejecting rule otherwise.
local now = now_us(ARGV[1])
local count = tonumber(ARGV[2])
local out = {}
local passed = {}
for i = 1, count do
  local a = 3 + 12 * (i - 1)
  local window, rate, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local pa
  if ARGV[a + 4] == '1' then
    pa = penalty_args(a + 6)
  end
  local m = log_meter(KEYS[2 * i - 1], now, window, rate, ARGV[a + 3], ARGV[1] == '')
  local reply, allows = decide(m, KEYS[2 * i], now, rate, n, pa, false)
  for _, x in ipairs(reply) do
    out[#out + 1] = x
  end
  if allows then
    passed[#passed + 1] = {m = m, n = n}
  elseif ARGV[a + 5] ~= '1' then
    return out
  end
end
for _, p in ipairs(passed) do
  record(p.m.log, now, p.m.window, p.n, p.m.id)
end
return out
