package httplimit_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
)

// TestConcurrencyPolicy: a policy with a Concurrency rule holds a slot
// while the handler serves the request, after the rate policy allowed it;
// a request over the cap gets 429 with Retry-After and the concurrency
// problem type; the slot comes back when the handler returns, and when it
// panics.
func TestConcurrencyPolicy(t *testing.T) {
	e := newEnv(t)
	rate := ratelimit.Rule{Name: "exports-rate", Limit: ratelimit.PerMinute(100)}
	slots := ratelimit.Rule{Name: "exports", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1, Window: 30 * time.Second}}
	user := httplimit.Header("X-User")
	policies := []httplimit.Policy{{Rule: slots, Key: user}, {Rule: rate, Key: user}}
	if err := httplimit.Validate(e.lim, policies, httplimit.Options{}); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Panic") != "" {
			panic("boom")
		}
		if r.Header.Get("X-Block") != "" {
			entered <- struct{}{}
			<-release
		}
		w.Write([]byte("exported\n"))
	})
	h := httplimit.Stack(e.lim, policies, httplimit.Options{})(slow)

	var wg sync.WaitGroup
	wg.Add(1)
	var first *http.Response
	go func() {
		defer wg.Done()
		first = get(h, peer, "X-User", "ann", "X-Block", "1")
	}()
	<-entered
	check(t, get(h, peer, "X-User", "ann"), want{
		status:     429,
		policy:     `"exports-rate";q=100;w=60, "exports";q=1;w=30`,
		limit:      `"exports-rate";r=98;t=60, "exports";r=0;t=30`,
		retryAfter: "30",
		body: `{"type":"https://pkg.go.dev/github.com/ratelimit-go/ratelimit/httplimit#ProblemConcurrencyExceeded",` +
			`"title":"Too many requests of this client are in progress","status":429,` +
			`"detail":"Too many requests in progress: try again when one has finished.","violated-policies":["exports"]}` + "\n",
	})
	// Another user has a slot of their own.
	check(t, get(h, peer, "X-User", "bob"), want{
		status: 200,
		policy: `"exports-rate";q=100;w=60, "exports";q=1;w=30`,
		limit:  `"exports-rate";r=99;t=60, "exports";r=0;t=30`,
		body:   "exported\n",
	})
	release <- struct{}{}
	wg.Wait()
	if first.StatusCode != 200 {
		t.Fatalf("the first request got %d", first.StatusCode)
	}
	// ann's slot is back: a panicking handler takes it and gives it back.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the handler's panic did not reach the server")
			}
		}()
		get(h, peer, "X-User", "ann", "X-Panic", "1")
	}()
	if res := get(h, peer, "X-User", "ann"); res.StatusCode != 200 {
		t.Fatalf("after the panic, ann's next request got %d: the slot leaked", res.StatusCode)
	}
}
