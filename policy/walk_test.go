package policy_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/policy"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

var epoch = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newLimiter(t *testing.T) *ratelimittest.Limiter {
	t.Helper()
	// A generous Timeout: under -race a call to miniredis can take longer
	// than the default, and a timed-out call is decided locally.
	l, err := ratelimittest.NewLimiter(ratelimit.Options{Clock: ratelimittest.NewClock(epoch),
		Logger: slog.New(slog.DiscardHandler), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("ratelimittest.NewLimiter: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

// remaining is what a Peek of rule and key says is left.
func remaining(t *testing.T, l *ratelimittest.Limiter, rule ratelimit.Rule, key string) int {
	t.Helper()
	res, err := l.Peek(context.Background(), rule, key)
	if err != nil {
		t.Fatalf("Peek %s %s: %v", rule.Name, key, err)
	}
	return res.Remaining
}

// TestWalk runs requests through a stack of policies and checks who was
// asked, who denied, and what each policy has left afterwards: a request
// denied by a later policy costs the earlier ones nothing.
func TestWalk(t *testing.T) {
	global := ratelimit.Rule{Name: "global", Limit: ratelimit.PerMinute(100)}
	perUser := ratelimit.Rule{Name: "per-user", Limit: ratelimit.PerMinute(2)}
	watch := ratelimit.Rule{Name: "watch", Limit: ratelimit.PerMinute(1), DryRun: true}
	entries := func(user string) []policy.Entry {
		return []policy.Entry{
			{Rule: global, Key: "all"},
			{Name: "user", Rule: perUser, Key: user},
			{Rule: watch, Key: user},
		}
	}
	type step struct {
		user      string
		asked     []string // names of the outcomes, in order
		allowed   bool
		dryRun    bool // the last outcome is a dry run's would-be denial
		global    int  // global's remaining afterwards
		aliceLeft int  // per-user's remaining for alice afterwards
	}
	steps := []step{
		{user: "alice", asked: []string{"global", "user", "watch"}, allowed: true, global: 99, aliceLeft: 1},
		{user: "alice", asked: []string{"global", "user", "watch"}, allowed: true, dryRun: true, global: 98, aliceLeft: 0},
		// Denied by the second policy: the first takes its event back.
		{user: "alice", asked: []string{"global", "user"}, allowed: false, global: 98, aliceLeft: 0},
		{user: "alice", asked: []string{"global", "user"}, allowed: false, global: 98, aliceLeft: 0},
		{user: "bob", asked: []string{"global", "user", "watch"}, allowed: true, global: 97, aliceLeft: 0},
	}
	l := newLimiter(t)
	for i, s := range steps {
		out, err := policy.Walk(context.Background(), l.Limiter, entries(s.user), nil)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		var names []string
		for _, o := range out {
			names = append(names, o.Name)
		}
		if !equal(names, s.asked) {
			t.Errorf("step %d: asked %q, want %q", i, names, s.asked)
		}
		last := out[len(out)-1]
		if last.Result.Allowed != s.allowed || last.Result.DryRun != s.dryRun {
			t.Errorf("step %d: last outcome %+v, want allowed %v, dry run %v", i, last.Result, s.allowed, s.dryRun)
		}
		if _, denied := policy.Denial(out); denied == s.allowed {
			t.Errorf("step %d: Denial says denied %v, want %v", i, denied, !s.allowed)
		}
		if got := remaining(t, l, global, "all"); got != s.global {
			t.Errorf("step %d: global has %d left, want %d", i, got, s.global)
		}
		if got := remaining(t, l, perUser, "alice"); got != s.aliceLeft {
			t.Errorf("step %d: alice has %d left, want %d", i, got, s.aliceLeft)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWalkAppendsToDst(t *testing.T) {
	l := newLimiter(t)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(5)}
	dst := make([]policy.Outcome, 1, 4)
	dst[0].Name = "earlier"
	out, err := policy.Walk(context.Background(), l.Limiter, []policy.Entry{{Rule: rule, Key: "k"}}, dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Name != "earlier" || out[1].Name != "r" || out[1].Key != "k" || !out[1].Result.Allowed {
		t.Fatalf("Walk returned %+v", out)
	}
}

func TestWalkErrors(t *testing.T) {
	ok := ratelimit.Rule{Name: "ok", Limit: ratelimit.PerMinute(5)}
	bad := ratelimit.Rule{Name: "bad"} // no Limit
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	l := newLimiter(t)
	cases := []struct {
		name    string
		lim     *ratelimit.Limiter
		ctx     context.Context
		entries []policy.Entry
		want    error  // errors.Is
		msg     string // the error's text, exact
		asked   int    // outcomes returned
	}{
		{name: "nil limiter", ctx: context.Background(), entries: []policy.Entry{{Rule: ok, Key: "k"}},
			want: policy.ErrNoLimiter, msg: "policy: nil Limiter"},
		{name: "invalid rule after a valid one", lim: l.Limiter, ctx: context.Background(),
			entries: []policy.Entry{{Rule: ok, Key: "k"}, {Name: "second", Rule: bad, Key: "k"}},
			want:    ratelimit.ErrInvalidRule, asked: 1},
		{name: "empty key", lim: l.Limiter, ctx: context.Background(),
			entries: []policy.Entry{{Rule: ok}}, want: ratelimit.ErrInvalidKey},
		{name: "canceled context", lim: l.Limiter, ctx: canceled,
			entries: []policy.Entry{{Rule: ok, Key: "k"}}, want: context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := policy.Walk(c.ctx, c.lim, c.entries, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want one wrapping %v", err, c.want)
			}
			if c.msg != "" && err.Error() != c.msg {
				t.Errorf("error %q, want %q", err, c.msg)
			}
			if len(out) != c.asked {
				t.Errorf("%d outcomes, want %d", len(out), c.asked)
			}
		})
	}
	// The failing policy is named, and what the first recorded is taken back.
	_, err := policy.Walk(context.Background(), l.Limiter, []policy.Entry{{Rule: ok, Key: "k"}, {Name: "second", Rule: bad, Key: "k"}}, nil)
	if want := `policy "second": `; err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error %v, want it to start with %s", err, want)
	}
	if got := remaining(t, l, ok, "k"); got != 5 {
		t.Errorf("ok has %d left after failed walks, want 5", got)
	}
}

func TestWalkNoEntries(t *testing.T) {
	l := newLimiter(t)
	out, err := policy.Walk(context.Background(), l.Limiter, nil, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("Walk of no entries: %v, %v", out, err)
	}
}

// TestWalkDenialLeavesEarlierQuotasAsTheyWere: the outcomes of the policies
// before a denial say what they have left once the request's event is
// taken back, down to a window that is empty again (no t).
func TestWalkDenialLeavesEarlierQuotasAsTheyWere(t *testing.T) {
	l := newLimiter(t)
	global := ratelimit.Rule{Name: "global", Limit: ratelimit.PerMinute(10)}
	hourly := ratelimit.Rule{Name: "hourly", Limit: ratelimit.PerHour(1)}
	entries := []policy.Entry{{Rule: global, Key: "all"}, {Rule: hourly, Key: "alice"}}
	want := []string{
		`"global";r=9;t=60, "hourly";r=0;t=3600`,
		`"global";r=9;t=60, "hourly";r=0;t=3570`, // 30s later: global still holds the first event
		`"global";r=10, "hourly";r=0;t=3480`,     // 2m later: global's window is empty again
	}
	for i, at := range []time.Duration{0, 30 * time.Second, 2 * time.Minute} {
		l.Clock.Set(epoch.Add(at))
		out, err := policy.Walk(context.Background(), l.Limiter, entries, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := policy.Format(out).RateLimit; got != want[i] {
			t.Errorf("request %d at %v: RateLimit %s, want %s", i, at, got, want[i])
		}
	}
	if got := remaining(t, l, global, "all"); got != 10 {
		t.Errorf("global has %d left, want 10", got)
	}
}
