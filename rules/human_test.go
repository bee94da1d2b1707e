package rules

import "testing"

// TestHuman: durations rounded as a person reads them, and never to 0 when
// they are not.
func TestHuman(t *testing.T) {
	for in, want := range map[string]string{
		"0s":           "0s",
		"350.4µs":      "350µs",
		"639.4999ms":   "639ms",
		"999.6ms":      "1s",
		"2.46s":        "2.5s",
		"59.96s":       "1m0s",
		"4m47.639045s": "4m48s",
		"1h0m0.4s":     "1h0m0s",
		"-1.26s":       "-1.3s",
		"none":         "none",
	} {
		if got := human(in); got != want {
			t.Errorf("human(%q) = %q, want %q", in, got, want)
		}
	}
}
