-- allow.lua: decides one call of Limiter.Allow, AllowN or Peek, for a rule
-- of any kind. Composed after now.lua, the piece of the rule's kind
-- (window.lua, counter.lua, gcra.lua or quota.lua), decide.lua and, for a
-- rule with a penalty, strikes.lua. The key's last letter says the kind.
--
-- KEYS[1]  the rule's events: an exact log (a ZSET of events scored by
--          their time in µs, key ending in 'l'), an approximate counter
--          ('c', see counter.lua), a GCRA bucket ('g', see gcra.lua) or a
--          calendar quota ('q', see quota.lua).
-- KEYS[2]  the rule's penalty state (see strikes.lua); unused for a rule
--          without penalty.
-- KEYS[3]  the time of the pair's last Reset (see reset.lua); only when the
--          process holds the call back (ARGV[6] or ARGV[8] not 0).
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME (never ''
--          for a quota: Go computed its period from that time).
-- ARGV[2]  a log's or a counter's window in µs; a bucket's wq, the cost of
--          one event in ticks (Window / gcd(Window, Rate)); the start of a
--          quota's period, in µs.
-- ARGV[3]  rate: what count + n must not exceed: the events allowed in any
--          window, in a period, or a bucket's Burst.
-- ARGV[4]  n: events this call asks for; 0 peeks: answers for n = 1 and
--          records nothing.
-- ARGV[5]  a log's member id for this call (unique across processes and
--          calls); a bucket's rq, ticks per µs (Rate / gcd(Window, Rate));
--          the end of a quota's period, in µs; unused for a counter.
-- ARGV[6]  held: µs until the calling process' own count has room for the
--          call (0: it has; see decide.lua).
-- ARGV[7]  owed: events the process allowed without Redis that Redis does
--          not hold yet.
-- ARGV[8]  µs left of a ban the process knows of (0: none).
-- ARGV[9]  since: the oldest event the process' own count holds, in µs
--          (0: not known; see decide.lua).
-- ARGV[10]..ARGV[15]  with a penalty: warn_after (0: no warning stage),
--          ban_after (>= 1), ban_for (µs), memory (µs), growth of each
--          further ban (1: every ban lasts ban_for), max_ban (µs).
--
-- Returns decide's nine numbers (see decide.lua), or only the first four
-- for a rule without penalty (the other five are 0); for a counter one
-- more: the index of the fixed window events recorded by this call went
-- into (now / window), which undo.lua needs.
local now = now_us(ARGV[1])
local rate = tonumber(ARGV[3])
local pa
if ARGV[10] then
  pa = penalty_args(10)
end
local kind = string.byte(KEYS[1], -1)
local m
if kind == 103 then -- 'g'
  m = gcra_meter(KEYS[1], now, tonumber(ARGV[2]), tonumber(ARGV[5]), rate)
elseif kind == 113 then -- 'q'
  m = quota_meter(KEYS[1], now, tonumber(ARGV[2]), tonumber(ARGV[5]))
elseif kind == 99 then -- 'c'
  m = counter_meter(KEYS[1], now, tonumber(ARGV[2]), rate)
else
  m = log_meter(KEYS[1], now, tonumber(ARGV[2]), rate, ARGV[5], ARGV[1] == '')
end
local reply = decide(m, KEYS[2], now, rate, tonumber(ARGV[4]), pa, true, tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), KEYS[3], tonumber(ARGV[9]))
-- Without a penalty the last five numbers are 0 and Go knows it: Redis'
-- reply ends at the first nil, and every number sent costs Redis time.
local last = 9
if not pa then
  last = 4
end
if kind == 99 then
  last = last + 1
  reply[last] = m.win
end
reply[last + 1] = nil
return reply
