package main

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/ratelimit-go/ratelimit/rules"
)

// TestRoutesIndex: the inspection page's index names the key each route
// counts a request under, and it is the key the route's KeyFunc builds: a
// request to each route, from 127.0.0.1 as alice, is counted under the
// index's first key to peek, and the index's link to it shows that on the
// rules page.
func TestRoutesIndex(t *testing.T) {
	var names []string
	for _, r := range shopRoutes {
		names = append(names, r.Rule)
	}
	if strings.Join(names, ",") != strings.Join(shopRules, ",") {
		t.Fatalf("the index's rules %q, the shop's %q", names, shopRules)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, defaultRules, 0o644); err != nil {
		t.Fatal(err)
	}
	watcher, err := rules.Watch(path, rules.WatchOptions{Interval: time.Hour, Require: shopRules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Close() })
	lim, err := ratelimit.New(nil, ratelimit.Options{Clock: ratelimittest.NewClock(time.Date(2026, 11, 11, 20, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	shop := shopWith(lim, httplimit.IPOptions{}, watcher)
	page := httptest.NewServer(inspection(watcher, lim))
	// A completion's answer of one token: counted as one event, as the
	// other routes' requests are.
	defer func(f func(int) int) { answerTokens = f }(answerTokens)
	answerTokens = func(int) int { return 1 }
	t.Cleanup(page.Close)

	// An export runs until its request ends: end it once it was seen.
	ctx, endExport := context.WithCancel(context.Background())
	exported := make(chan int, 1)
	go func() {
		r := httptest.NewRequest("POST", "/exports", nil).WithContext(ctx)
		r.RemoteAddr = "127.0.0.1:5000"
		r.Header.Set(userHeader, "alice")
		w := httptest.NewRecorder()
		shop.ServeHTTP(w, r)
		exported <- w.Code
	}()
	defer func() { endExport(); <-exported }()
	for _, route := range shopRoutes {
		if route.Rule != exportRule.Name {
			method, target, _ := strings.Cut(route.Pattern, " ")
			target = strings.Replace(target, "{id}", "42", 1)
			if w := shopRequest(shop, method, target, "127.0.0.1:5000", userHeader, "alice"); w.Code >= 300 {
				t.Fatalf("%s: %d", route.Pattern, w.Code)
			}
		}
		rule, _ := watcher.For(route.Rule, route.Peek[0])
		counted := func() bool {
			r, err := lim.Peek(context.Background(), rule, route.Peek[0])
			return err == nil && r.Remaining == rule.Limit.Rate-1
		}
		deadline := time.Now().Add(10 * time.Second) // a bound on a hang, not a speed check
		for !counted() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the request was not counted under %q, the key the index names", route.Pattern, route.Peek[0])
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// An IPv6 client is counted under its /64: curl to localhost over IPv6.
	if w := shopRequest(shop, "GET", "/merchants/1", "[::1]:5000"); w.Code != http.StatusOK {
		t.Fatalf("a merchant page over IPv6: %d", w.Code)
	}
	if r, _ := lim.Peek(context.Background(), merchantRule, "::/64"); r.Remaining != merchantRule.Limit.Rate-1 {
		t.Fatalf("a request from ::1 is not counted under ::/64, as the index says: %+v", r)
	}

	index := get(t, page.URL+"/")
	for _, route := range shopRoutes {
		for _, want := range []string{"<code>" + route.Pattern + "</code>", "<code>" + route.Rule + "</code>"} {
			if !strings.Contains(index, want) {
				t.Errorf("the index lacks %q", want)
			}
		}
	}
	// Follow the index's link to the merchant route's key: the rules page
	// shows the page request counted there.
	const link = `<a href="limits/?key=127.0.0.1&amp;rule=shop%3Amerchant">`
	if !strings.Contains(index, link) {
		t.Fatalf("the index has no link to peek at 127.0.0.1 under shop:merchant:\n%s", index)
	}
	state := get(t, page.URL+"/"+html.UnescapeString(strings.TrimSuffix(strings.TrimPrefix(link, `<a href="`), `">`)))
	if !strings.Contains(state, "4 of 5") {
		t.Errorf("the index's link to 127.0.0.1 under shop:merchant does not show the request counted:\n%s", state)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, res.StatusCode, b)
	}
	return string(b)
}
