package ratelimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// TestPrefetchBounds: Prefetch is at most min(Window / 10, 500ms) (500ms
// for a calendar quota), for every kind but concurrency.
func TestPrefetchBounds(t *testing.T) {
	log := func(window, prefetch time.Duration) ratelimit.Rule {
		return ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 10, Window: window}, Prefetch: prefetch}
	}
	for _, c := range []struct {
		name string
		rule ratelimit.Rule
		ok   bool
	}{
		{"zero: off", log(time.Second, 0), true},
		{"a tenth of the window", log(time.Second, 100*time.Millisecond), true},
		{"more than a tenth", log(time.Second, 100*time.Millisecond+time.Microsecond), false},
		{"500ms of a long window", log(time.Hour, 500*time.Millisecond), true},
		{"more than 500ms", log(time.Hour, 501*time.Millisecond), false},
		{"negative", log(time.Second, -time.Millisecond), false},
		{"under a µs", log(time.Second, time.Nanosecond), false},
		{"approximate", func() ratelimit.Rule { r := log(time.Second, 10*time.Millisecond); r.Approximate = true; return r }(), true},
		{"gcra", ratelimit.Rule{Name: "r", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 10 * time.Millisecond}, true},
		{"fixed window", ratelimit.Rule{Name: "r", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 10 * time.Millisecond}, true},
		{"fixed window, more than a tenth", ratelimit.Rule{Name: "r", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 101 * time.Millisecond}, false},
		{"quota", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 10, Period: ratelimit.Day}, Prefetch: 500 * time.Millisecond}, true},
		{"quota, more than 500ms", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 10, Period: ratelimit.Day}, Prefetch: 501 * time.Millisecond}, false},
		{"concurrency", ratelimit.Rule{Name: "r", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 10}, Prefetch: 10 * time.Millisecond}, false},
	} {
		err := c.rule.Validate()
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ratelimit.ErrInvalidRule)) {
			t.Errorf("%s: Validate() = %v, want ok %v", c.name, err, c.ok)
		}
	}
}
