//go:build !race

package readme

// raceEnabled reports a build with the race detector.
const raceEnabled = false
