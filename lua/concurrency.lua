-- concurrency.lua: the leases of one (rule, key) pair (Kind Concurrency):
-- the exact sliding log of sliding.lua, each lease an event under its id
-- scored by when it was taken or last renewed, so that the log's count is
-- the leases held. Every piece of the decision is sliding.lua's, but two:
--
-- concurrency.read puts back, before the decision counts, the leases the
-- calling process holds on Redis when Redis lost them: the pair's mark is
-- gone. The process sends them after the penalty's arguments (ARGV[7] on,
-- ARGV[9] on with a penalty), as pairs of the lease's time and its id;
-- the mark is the time of the pair's last Reset (tomb, KEYS[3]), or -1
-- when none is remembered, and lasts while a lease recorded on Redis can
-- live. So a process' leases count in the very decision after Redis
-- restarted without persistence (or failed over to a replica that never
-- had them), and no other instance is granted their slots once it has
-- decided; while the mark is there, a lease the process sends was released
-- or expired, or a Reset freed it, and is left out.
--
-- concurrency.record records the lease as sliding.record does, and keeps
-- the mark (see concurrency.mark; renew.lua keeps it too).

{{- define "concurrency.args"}}{{template "sliding.args" .}}{{end}}

{{- define "concurrency.read" -}}
local first = {{if .Penalty}}9{{else}}7{{end}}
if #ARGV > first and redis.call('EXISTS', tomb) == 0 then
  for i = first, #ARGV - 1, 2 do
    redis.call('ZADD', key, 'NX', ARGV[i], ARGV[i + 1])
  end
  redis.call('PEXPIRE', key, {{template "ttl.arg" "window"}})
  {{template "concurrency.mark" "window"}}
end
{{- end}}

{{- define "concurrency.count"}}{{template "sliding.count" .}}{{end}}
{{- define "concurrency.retry"}}{{template "sliding.retry" .}}{{end}}
{{- define "concurrency.reset"}}{{template "sliding.reset" .}}{{end}}

{{- define "concurrency.record" -}}
{{template "sliding.record"}}
{{template "concurrency.mark" "window"}}
{{- end}}

{{- define "concurrency.pending"}}{{template "sliding.pending" .}}{{end}}
{{- define "concurrency.undo"}}{{template "sliding.undo" .}}{{end}}
{{- define "concurrency.writeback"}}{{template "sliding.writeback" .}}{{end}}

{{/* concurrency.mark keeps the pair's mark (tomb) at least as long as a
lease recorded now can live, the µs of the Lua expression given: it sets
-1 when no Reset is remembered, and otherwise only lengthens the Reset's
time. A mark it sets or lengthens lives twice that, so that most acquires
only read it (a PEXPIRE on every one cost 8% of an acquire's Redis
instructions, callgrind). */}}
{{- define "concurrency.mark" -}}
local mark_ttl = {{template "ttl" .}}
local mark_left = redis.call('PTTL', tomb)
if mark_left == -2 then
  redis.call('SET', tomb, '-1', 'PX', 2 * mark_ttl)
elseif mark_left >= 0 and mark_left < mark_ttl then
  redis.call('PEXPIRE', tomb, 2 * mark_ttl)
end
{{- end}}
