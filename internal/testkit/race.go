//go:build race

package testkit

// RaceEnabled reports a build with the race detector, whose instrumentation
// allocates and slows every goroutine: allocation counts and load spikes
// mean nothing there.
const RaceEnabled = true
