package conformance

import (
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// DryRun: a rule in dry run lets every call through, and says what
// enforcing would have answered, on every backend alike.
func DryRun(t *testing.T, backends []Backend) {
	rule := ratelimit.Rule{Name: "dry", Limit: ratelimit.PerMinute(2), DryRun: true,
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: time.Hour}}
	steps := []step{
		{at: 0, want: ok(2, 1, time.Minute)},
		{at: sec, want: ok(2, 0, time.Minute)},
		{at: 2 * sec, want: dry(warned(violated(no(2, 0, 58*sec, 59*sec), 1)))},
		{at: 3 * sec, want: dry(banned(violated(no(2, 0, time.Hour, 58*sec), 2), time.Hour))},
		{at: 4 * sec, do: peek, want: dry(banned(violated(no(2, 0, time.Hour-sec, 57*sec), 2), time.Hour-sec))},
	}
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			clk := testkit.NewClock()
			runSteps(t, b.New(t, testkit.Options(clk)), clk.Set, behaviourCase{rule: rule, steps: steps})
		})
	}
}

func dry(r R) R { r.Allowed, r.DryRun = true, true; return r }
