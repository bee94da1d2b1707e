-- undo.lua: takes back the events one allowed call recorded, when AllowAll
-- denies the request at a later rule, or when a lease is released. An
-- entry of the scripts' templates (see remote.go and now.lua), composed
-- once per kind with its <kind>.undo piece.
--
-- KEYS[1]  the meter of the rule's kind.
-- KEYS[2]  a reservation's record (see allow.lua's Reserve), when the
--          events are a reservation's of a kind whose events have no
--          member: nothing is taken back without it (Redis never recorded
--          the events, or lost them, or a settle took them back before),
--          and it is deleted with the take back; nor when the pair's last
--          Reset, KEYS[3], is not the one the record holds (a Reset cleared
--          the events since). Not for a kind that keeps the record in its
--          meter (<kind>.hold: a GCRA bucket): its undo finds the record
--          there by ARGV[1], and with ARGV[2] = 0 settles the reservation
--          at its cost.
-- KEYS[3]  with KEYS[2]: the time of the pair's last Reset.
-- ARGV[1]  the call's member id (as allow.lua got it).
-- ARGV[2]  n: the events the call recorded.
-- ARGV[3], ARGV[4] what the kind needs to find them (see the kind's
--          undoArgs): for a counter the index of the fixed window the
--          events went into (allow.lua's last number); once the counter
--          has moved to another window they are no longer its current
--          count, and nothing is taken back, as the local path's
--          meter.Counter.Unrecord does. For a quota: the start of the
--          period the events went into, likewise. For a bucket: wq and rq (see gcra.lua); its
--          events are the reservation's ARGV[1] keeps in the bucket.
-- ARGV[5]  a log's, only for a call of more than one event: the index of
--          the first of its events to take back (its members are id:1 ..
--          id:m), n of them from there.
--
-- <kind>.undo sets back, the events taken back, from key, n and ARGV.
--
-- Returns the events taken back.
{{- define "undo" -}}
local key = KEYS[1]
local n = tonumber(ARGV[2])
local back = 0
{{- if not (has "hold" .)}}
if KEYS[2] then
  local reset_at = redis.call('GET', KEYS[2])
  if not reset_at then
    return 0
  end
  redis.call('DEL', KEYS[2])
  if reset_at ~= (redis.call('GET', KEYS[3]) or '0') then
    return 0
  end
end
{{- end}}
{{kind "undo" .}}
return back
{{- end}}
