-- writeback.lua: writes back one batch of what a process decided without
-- Redis for one (rule, key) pair (see writeback.go): a Reset and a ban
-- Redis did not see, violations, and events. An entry of the scripts'
-- templates (see remote.go and now.lua), composed once per kind with its
-- <kind>.writeback piece, which adds the batch's events to the kind's
-- meter, and penalty.lua's pieces.
-- The batch is applied at most once: its id is remembered under KEYS[4] for ARGV[4] ms,
-- and a replay (a reply that was lost, and the batch sent again) finds it
-- and changes nothing.
--
-- Order within the batch: the Reset first (it removes only what was
-- recorded in the log before its time, so events recorded since, by this
-- batch or by calls Redis decided meanwhile, stay; the other kinds' state
-- has no times and goes whole), then the ban and the violations, then the
-- events.
--
-- KEYS[1]  the meter of the batch's kind (see its lua/ file).
-- KEYS[2]  the rule's penalty state (see penalty.lua).
-- KEYS[3]  the batch's id: set once the batch is applied.
-- KEYS[4]  the time of the pair's last Reset (see reset.lua).
-- KEYS[5..] every kind's meter of the pair, for a Reset.
-- ARGV[1]  the batch id, the start of the members of its log events.
-- ARGV[2]  window in µs (a log's, a counter's).
-- ARGV[3]  how long KEYS[3] is kept, in ms.
-- ARGV[4]  '1' when a Reset made at ARGV[5] (µs) is to be applied.
-- ARGV[5]  the Reset's time, in µs.
-- ARGV[6]  the end of a ban decided without Redis, in µs (0: none).
-- ARGV[7]  violations counted without Redis.
-- ARGV[8]  bans the ladder started without Redis.
-- ARGV[9]  the time of the last of those violations, in µs.
-- ARGV[10] how long violations are remembered, in µs.
-- ARGV[11] the writer's time, in µs, for the TTLs.
-- ARGV[12] the oldest stamp that still counts at the writer's time: a
--          kind skips older ones (a batch sent again late).
-- ARGV[13], ARGV[14] the rule's numbers as allow.lua gets them as its
--          ARGV[2] and ARGV[5], at the writer's time (see the kind's
--          <kind>.args).
-- ARGV[15] m: how many pairs follow.
-- ARGV[16..15+2m] pairs of stamp and count, stamps ascending, as the
--          kind stamps its events (see writeBackKind.stamp): for a log the
--          events' time in µs, for a bucket the time of the cut and the
--          tokens its carry held then (see debt.fold), for a counter the index of the
--          fixed window they were counted in, for a quota the start of
--          their period. Their log members are made from the batch id.
-- ARGV[16+2m..] (a log only) triples of stamp, count and member id: events
--          of calls whose script may have run before they were decided
--          without Redis, recorded under the member the script got (as
--          sliding.lua's sliding.add does), so that Redis counts each once.
--
-- <kind>.writeback adds pairs first .. last (ARGV indexes, step 2) to the
-- meter key.
--
-- Returns 1 when the batch was applied, 0 when it had been already.

{{/* writeback.stamped declares stamped, the events of the batch's pairs
stamped with the Lua expression given as the piece's argument (the
window or period they still count in). */}}
{{- define "writeback.stamped" -}}
local stamped = 0
for i = first, last, 2 do
  if tonumber(ARGV[i]) == {{.}} then
    stamped = stamped + tonumber(ARGV[i + 1])
  end
end
{{- end}}

{{- define "writeback" -}}
local key, pen, done = KEYS[1], KEYS[2], KEYS[3]
if not redis.call('SET', done, '1', 'NX', 'PX', ARGV[3]) then
  return 0
end

if ARGV[4] == '1' then
  -- A log keeps what was recorded since the Reset (a weighted log's grant
  -- members leave its sum with them, see weighted.lua); the other meters
  -- hold no times and go whole.
  for i = 5, #KEYS do
    if redis.call('TYPE', KEYS[i])['ok'] == 'zset' then
      local key = KEYS[i]
      {{template "weighted.drop" "ARGV[5]"}}
    else
      redis.call('DEL', KEYS[i])
    end
  end
  redis.call('DEL', pen)
  local tomb = KEYS[4]
  {{template "reset.mark" "ARGV[5]"}}
  redis.call('SET', tomb, at, 'PX', ARGV[3])
end

local banned_to = tonumber(ARGV[6])
local dv = tonumber(ARGV[7])
if banned_to > 0 or dv > 0 then
  {{template "penalty.read"}}
  local now = tonumber(ARGV[11])
  local keep = 0
  if dv > 0 then
    local at = tonumber(ARGV[9])
    local memory = tonumber(ARGV[10])
    {{template "penalty.forget" "at"}}
    v = v + dv
    k = k + tonumber(ARGV[8])
    if at > last then
      last = at
    end
    redis.call('HSET', pen, 'v', string.format('%d', v), 'l', string.format('%d', last), 'k', string.format('%d', k))
    keep = last + memory - now
  end
  if banned_to > ban_end then
    redis.call('HSET', pen, 'b', string.format('%d', banned_to))
    ban_end = banned_to
  end
  if ban_end - now > keep then
    keep = ban_end - now
  end
  keep = {{template "ttl" "keep"}}
  if redis.call('PTTL', pen) < keep then
    redis.call('PEXPIRE', pen, keep)
  end
end

if #ARGV == 15 then
  return 1
end
local first = 16
local last = 15 + 2 * tonumber(ARGV[15])
{{kind "writeback" .}}
return 1
{{- end}}
