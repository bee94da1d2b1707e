//go:build !race

package ratelimit_test

// raceEnabled reports a build with the race detector, whose instrumentation
// allocates: allocation counts mean nothing there.
const raceEnabled = false
