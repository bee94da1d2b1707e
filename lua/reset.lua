-- reset.lua: Limiter.Reset of one (rule, key) pair: deletes its state and
-- remembers the Reset's time, so that every process' own count of the pair
-- from before it stops counting (see mirror.go's hold and decide.lua). It
-- deletes before it writes: Redis at maxmemory refuses a script's first
-- write that would grow it, and a Reset must free memory even then. An
-- entry of the scripts' templates (see remote.go and now.lua).
--
-- KEYS[1..5]  the pair's log, penalty state, approximate counter, GCRA
--          bucket and calendar quota.
-- KEYS[6]  the time of the pair's last Reset.
-- ARGV[1]  the Reset's time, in µs.
-- ARGV[2]  how long the time is kept, in ms: as long as state from before
--          it could still count.
--
-- Returns 1.
{{- define "reset" -}}
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('SET', KEYS[6], ARGV[1], 'PX', ARGV[2])
return 1
{{- end}}
