package ratelimit

// SetMirrorOff turns the mirror of Redis' decisions into the local store
// off (true) or back on, for BenchmarkMirror in the external test package.
func SetMirrorOff(off bool) { mirrorOff = off }
