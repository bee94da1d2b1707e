-- reset.lua: Limiter.Reset of one (rule, key) pair: deletes its state and
-- remembers the Reset's time, so that every process' own count of the pair
-- from before it stops counting (see mirror.go's hold and decide.lua). It
-- deletes before it writes: Redis at maxmemory refuses a script's first
-- write that would grow it, and a Reset must free memory even then. An
-- entry of the scripts' templates (see remote.go and now.lua).
--
-- KEYS[1]  the time of the pair's last Reset.
-- KEYS[2..] the pair's state: its penalty state and every kind's meter.
-- ARGV[1]  the Reset's time, in µs.
-- ARGV[2]  how long the time is kept, in ms: as long as state from before
--          it could still count.
--
-- Returns 1.
{{- define "reset" -}}
redis.call('DEL', unpack(KEYS, 2))
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
{{- end}}
