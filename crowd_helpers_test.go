package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/crowd"
)

// pairWay is one way a call asks for a pair that comes first: Allow, or
// AllowGroup with a roomy rule after it. k is the pair's local key, asked
// the Results the call returns when allowed.
type pairWay struct {
	name  string
	k     lkey
	asked int
	ask   func(*Limiter) ([]Result, error)
}

// pairWays returns the ways a call asks for rule's pair with key "k".
func pairWays(rule Rule) []pairWay {
	roomy := Rule{Name: "roomy", Limit: PerMinute(1000)}
	return []pairWay{
		{"Allow", lkey{Rule: rule.Name, Key: "k"}, 1, func(l *Limiter) ([]Result, error) {
			r, err := l.Allow(context.Background(), rule, "k")
			return []Result{r}, err
		}},
		{"AllowGroup", lkey{Rule: rule.Name, Key: "k", Group: "g"}, 2, func(l *Limiter) ([]Result, error) {
			return l.AllowGroup(context.Background(), "g", []Check{{Rule: rule, Key: "k"}, {Rule: roomy, Key: "k"}})
		}},
	}
}

// answer is what a call asked in the background returned.
type answer struct {
	rs  []Result
	err error
}

// inBackground asks w's call of l in its own goroutine.
func (w pairWay) inBackground(l *Limiter) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		rs, err := w.ask(l)
		done <- answer{rs, err}
	}()
	return done
}

// crowdOnItsWay gives w's pair under rule a crowd of room seats, one of them
// taken by a call on its way, and returns the rule's plan, the pair's shard
// and hash, and the crowd.
func crowdOnItsWay(t *testing.T, l *Limiter, rule Rule, w pairWay, room int64) (plan, *localShard, uint64, *crowd.Crowd) {
	t.Helper()
	p, err := rule.compile()
	if err != nil {
		t.Fatal(err)
	}
	sh, h := l.local.atPlan(&w.k, &p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cw := sh.gather(&w.k, h)
	cw.Left(room)
	cw.Sit()
	return p, sh, h, cw
}

// waitUntil polls cond, under sh's lock, until it holds; done answering
// first fails the test: the call was decided before it should have been.
func waitUntil(t *testing.T, sh *localShard, done <-chan answer, what string, cond func() bool) {
	t.Helper()
	holds := func() bool {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return cond()
	}
	for !holds() {
		select {
		case a := <-done:
			t.Fatalf("decided before %s: %+v, %v", what, a.rs, a.err)
		case <-time.After(time.Millisecond):
		}
	}
}
