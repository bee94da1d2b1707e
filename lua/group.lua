-- group.lua: several rules whose keys share one hash tag (Limiter.AllowGroup),
-- decided in one run: the request is allowed, and every rule records its
-- events, only if every rule allows it. Rules are asked in order; the first
-- that rejects stops the run (counting its violation, as allow.lua does),
-- and nothing is recorded. A rule in dry run reports its rejection without
-- stopping the others, and records nothing. An entry of the scripts'
-- templates (see remote.go and now.lua), composed once for each sequence of
-- rules a group holds, by kind and penalty (.Rules): each rule runs
-- decide.lua's decision composed for its own, and nothing asks at run time
-- what kind a rule has.
--
-- KEYS[3i-2], KEYS[3i-1], KEYS[3i]  rule i's events (a log, a GCRA
--          bucket or a quota), penalty state (HASH) and last Reset's time.
-- ARGV[1]  now in µs since the epoch, or '' to read Redis' TIME.
-- ARGV[2]  m: how many rules.
-- ARGV[3 + 13(i-1)] ...  rule i's kind (its meter key's letter, for the
--          reader), then as allow.lua's ARGV[2..5] for its kind (window,
--          rate, n, member id; for the other kinds see allow.lua),
--          penalize (1 or 0), dry run (1 or 0), held, owed, a known
--          ban's µs left and since (as allow.lua's ARGV[6] holds them),
--          then its penalty's two arguments (as allow.lua's ARGV[7..8]; see
--          penalty.lua's penalty.args and penalty.ladder).
--
-- Returns allow.lua's nine numbers per rule asked: for every rule when the
-- request is allowed, up to the rejecting rule otherwise.

{{- define "group" -}}
{{template "decide.locals"}}
{{template "now" "ARGV[1]"}}
{{- range .Preludes}}
{{- if has "prelude" .}}
{{kind "prelude" .}}
{{- end}}
{{- end}}
local out = {}
local passed = {}
{{- range .Rules}}
do
  local i = {{.Index}}
  local a = 3 + 13 * (i - 1)
  local key, pen, tomb = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local rate, n = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local held, owed, ban_left, since = tonumber(ARGV[a + 7]), tonumber(ARGV[a + 8]), tonumber(ARGV[a + 9]), tonumber(ARGV[a + 10])
  local strikes, struck = 0, 0 -- a group delivers no violations (see decide.lua)
  {{template "group.rule" .}}
end
{{- end}}
{{- range .Rules}}
if passed[{{.Index}}] then
  local p = passed[{{.Index}}]
  local key, n = p.key, p.n
  local reset
  {{kind "restore" .}}
  {{kind "record" .}}
end
{{- end}}
return out
{{- end}}

{{/* group.rule decides rule i, a rule of the kind and penalty of its
variant, appends its nine numbers to out and, when it allows events, what
its recording needs to passed; a rejection stops the run, unless the rule
is in dry run. */}}
{{- define "group.rule" -}}
{{kind "args" .}}
{{- if .Penalty}}
{{template "penalty.args" .}}
{{- end}}
{{kind "read" .}}
{{template "decide" .}}
{{- if has "given" .}}
{{template "decide.given" .}}
{{- end}}
local o = #out
{{- if .Penalty}}
out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7], out[o + 8], out[o + 9] = ok, count, retry, reset, v, flags, banned_for, memory_left, k
{{- else}}
out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7], out[o + 8], out[o + 9] = ok, count, retry, reset, 0, 0, 0, 0, 0
{{- end}}
if allows then
  passed[i] = {key = key, n = n, {{kind "keep" .}}}
elseif ARGV[a + 6] ~= '1' then
  return out
end
{{- end}}
