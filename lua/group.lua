-- group.lua: several rules whose keys share one hash tag (Limiter.AllowGroup),
-- decided in one run: the request is allowed, and every rule records its
-- events, only if every rule allows it. Rules are asked in order; the first
-- that rejects stops the run (counting its violation, as allow.lua does),
-- and nothing is recorded. A rule in dry run reports its rejection without
-- stopping the others, and records nothing. Composed after now.lua,
-- window.lua, strikes.lua and decide.lua, and gcra.lua and quota.lua when
-- the group holds those kinds.
--
-- KEYS[3i-2], KEYS[3i-1], KEYS[3i]  rule i's events (a log, a GCRA
--          bucket or a quota), penalty state (HASH) and last Reset's time.
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  m: how many rules.
-- ARGV[3 + 17(i-1)] ...  rule i's kind ('l' log, 'g' GCRA, 'q' quota),
--          then as allow.lua's ARGV[2..5] for its kind (window, rate, n,
--          member id; for the other kinds see allow.lua),
--          penalize (1 or 0), dry run (1 or 0), held, owed, a known
--          ban's µs left and since (as allow.lua's ARGV[6..9]), then its
--          penalty's six arguments (see strikes.lua's penalty_args).
--
-- Returns decide's nine numbers per rule asked: for every rule when the
-- request is allowed, up to the rejecting rule otherwise.
local now = now_us(ARGV[1])
local count = tonumber(ARGV[2])
local out = {}
local passed = {}
for i = 1, count do
  local a = 3 + 17 * (i - 1)
  local kind = ARGV[a]
  local window, rate, n = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local pa
  if ARGV[a + 5] == '1' then
    pa = penalty_args(a + 11)
  end
  local m
  if kind == 'g' then
    m = gcra_meter(KEYS[3 * i - 2], now, window, tonumber(ARGV[a + 4]), rate)
  elseif kind == 'q' then
    m = quota_meter(KEYS[3 * i - 2], now, window, tonumber(ARGV[a + 4]))
  else
    m = log_meter(KEYS[3 * i - 2], now, window, rate, ARGV[a + 4], ARGV[1] == '')
  end
  local reply, allows = decide(m, KEYS[3 * i - 1], now, rate, n, pa, false, tonumber(ARGV[a + 7]), tonumber(ARGV[a + 8]), tonumber(ARGV[a + 9]), KEYS[3 * i], tonumber(ARGV[a + 10]))
  for _, x in ipairs(reply) do
    out[#out + 1] = x
  end
  if allows then
    passed[#passed + 1] = {m = m, n = n}
  elseif ARGV[a + 6] ~= '1' then
    return out
  end
end
for _, p in ipairs(passed) do
  decide_record(p.m, now, p.n)
end
return out
