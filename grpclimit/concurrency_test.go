package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"google.golang.org/grpc/codes"
)

// TestConcurrencyStream: a policy with a Concurrency rule holds a slot for
// a stream's whole life; a stream over the cap fails with
// ResourceExhausted and the concurrency message; the slot comes back when
// the stream ends.
func TestConcurrencyStream(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "watchers", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1, Window: 30 * time.Second}}
	methods := grpclimit.Methods{watch: {{Rule: rule, Key: grpclimit.Global()}}}
	if err := grpclimit.Validate(e.lim, methods, grpclimit.Options{}); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	client := serve(t, "", nil, grpclimit.StreamServerInterceptor(e.lim, methods, grpclimit.Options{Logger: discard}))

	open := func() (outcome, context.CancelFunc) { return openWatch(t, client) }
	first, end := open()
	checkOutcome(t, first, want{code: codes.OK, policy: `"watchers";q=1;w=30`, limit: `"watchers";r=0;t=30`})
	second, _ := open()
	checkOutcome(t, second, want{code: codes.ResourceExhausted, message: grpclimit.DefaultConcurrencyMessage, retry: 30 * time.Second,
		quota:  `id=watchers value=1 quota "watchers": 1 calls in progress, the most it allows`,
		policy: `"watchers";q=1;w=30`, limit: `"watchers";r=0;t=30`})
	end()
	deadline := time.Now().Add(10 * time.Second)
	for {
		third, _ := open()
		if third.code == codes.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot of the ended stream never came back: %v %s", third.code, third.message)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
