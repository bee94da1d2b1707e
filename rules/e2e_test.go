package rules_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/rules"
)

// call is one request of the load: when it was sent and answered, and
// what came back.
type call struct {
	start, end time.Time
	status     int
	policy     string // RateLimit-Policy
	err        error
}

// TestReloadUnderLoad serves a route limited by a rules file under load,
// and changes the file's rule from 5 to 10 a second. Within 2 s of the
// change the server admits more than 5 a second could (the new limit is in
// force); the allowed calls never exceed the rule in force (the
// containment criterion: the allowed calls whose whole [start, end] lies
// in one interval shorter than the window are at most its Rate, 5 before
// the change, the larger 10 across and after it); and no request fails.
func TestReloadUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 5 s of real time")
	}
	const window = time.Second
	path := filepath.Join(t.TempDir(), "rules.yaml")
	file := func(rate string) string {
		return "rules:\n  - name: api\n    rate: " + rate + "\n    window: 1s\n"
	}
	if err := os.WriteFile(path, []byte(file("5")), 0o644); err != nil {
		t.Fatal(err)
	}
	var errs []error
	var errMu sync.Mutex
	w, err := rules.Watch(path, rules.WatchOptions{Interval: 100 * time.Millisecond, Require: []string{"api"},
		OnError: func(err error) { errMu.Lock(); errs = append(errs, err); errMu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	lim, err := ratelimit.New(nil, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	policies := []httplimit.Policy{{Rules: w, RuleName: "api", Key: httplimit.Global()}}
	if err := httplimit.Validate(lim, policies, httplimit.Options{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httplimit.Stack(lim, policies, httplimit.Options{})(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })))
	defer srv.Close()

	stop := make(chan struct{})
	var mu sync.Mutex
	var calls []call
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := call{start: time.Now()}
				res, err := srv.Client().Get(srv.URL)
				if err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					c.status, c.policy = res.StatusCode, res.Header.Get(httplimit.HeaderPolicy)
				}
				c.end, c.err = time.Now(), err
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	changed := time.Now()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(file("10")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()

	var allowed []call
	for _, c := range calls {
		switch {
		case c.err != nil:
			t.Fatalf("a request failed: %v", c.err)
		case c.status == http.StatusOK:
			allowed = append(allowed, c)
		case c.status != http.StatusTooManyRequests:
			t.Fatalf("a request was answered %d", c.status)
		}
	}
	if len(errs) > 0 {
		t.Fatalf("OnError: %v", errs)
	}
	// Containment: every interval [a, a+window) that starts at an allowed
	// call's start (the densest intervals do).
	slices.SortFunc(allowed, func(a, b call) int { return a.start.Compare(b.start) })
	for i, a := range allowed {
		limit := 10
		if !a.start.Add(window).After(changed) { // wholly before the change
			limit = 5
		}
		n := 0
		for _, b := range allowed[i:] {
			if b.end.Before(a.start.Add(window)) {
				n++
			}
		}
		if n > limit {
			t.Fatalf("%d allowed calls within %v from %v (the change at %v): the rule in force allows %d",
				n, window, a.start.Format("15:04:05.000"), changed.Format("15:04:05.000"), limit)
		}
	}
	// Within 2 s: every answer advertises the new quota, and the two
	// seconds that follow admit more than 5 a second could (10).
	from, to := changed.Add(2*time.Second), changed.Add(4*time.Second)
	admitted := 0
	for _, c := range calls {
		if c.start.Before(from) {
			continue
		}
		if !strings.Contains(c.policy, "q=10") {
			t.Fatalf("a request sent 2 s after the change was told %q", c.policy)
		}
		if c.status == http.StatusOK && c.end.Before(to) {
			admitted++
		}
	}
	t.Logf("%d requests, %d allowed; %d allowed in the 2 s from 2 s after the change", len(calls), len(allowed), admitted)
	if admitted <= 10 {
		t.Fatalf("%d allowed in 2 s, no more than 5 a second would allow: the new limit is not in force", admitted)
	}
}
