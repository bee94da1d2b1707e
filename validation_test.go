package ratelimit_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

func TestInvalidOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opts ratelimit.Options
	}{
		{"negative Timeout", ratelimit.Options{Timeout: -1}},
		{"negative TripAfter", ratelimit.Options{TripAfter: -1}},
		{"negative ProbeAfter", ratelimit.Options{ProbeAfter: -1}},
		{"negative LocalCapacity", ratelimit.Options{LocalCapacity: -1}},
		{"brace in KeyPrefix", ratelimit.Options{KeyPrefix: "app{1}:"}},
		{"unknown Degraded", ratelimit.Options{Degraded: 9}},
		{"share above 1", ratelimit.Options{DegradedShare: 1.5}},
		{"negative share", ratelimit.Options{DegradedShare: -0.5}},
		{"NaN share", ratelimit.Options{DegradedShare: math.NaN()}},
		{"negative LogInterval", ratelimit.Options{LogInterval: -1}},
		{"negative WriteBackMax", ratelimit.Options{WriteBackMax: -1}},
		{"HeartbeatInterval under 10ms", ratelimit.Options{HeartbeatInterval: time.Millisecond}},
	} {
		if l, err := ratelimit.New(nil, c.opts); !errors.Is(err, ratelimit.ErrInvalidOptions) || l != nil {
			t.Errorf("New with %s: %v, %v; want nil, ErrInvalidOptions", c.name, l, err)
		}
	}
}
