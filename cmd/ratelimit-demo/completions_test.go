package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// TestShopCompletions: a completion reserves its max_tokens (256 without
// one), and its handler settles the tokens its answer used: what it did
// not use is free again for the user's next request, and an answer longer
// than the estimate is charged the extra; a max_tokens the model cannot
// take is refused with 400 and costs nothing.
func TestShopCompletions(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := ratelimittest.NewClock(time.Date(2026, 11, 11, 20, 0, 0, 0, time.UTC))
	lim, err := ratelimit.New(newClient(t, mr.Addr()), ratelimit.Options{Clock: clk, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	var answers []int // the lengths of the next answers
	defer func(f func(int) int) { answerTokens = f }(answerTokens)
	answerTokens = func(limit int) int {
		n := answers[0]
		answers = answers[1:]
		if n > limit {
			t.Fatalf("an answer of %d tokens past its limit %d", n, limit)
		}
		return n
	}
	shop := newShop(lim, httplimit.IPOptions{})
	const alice = "198.51.100.7:4000"
	const policy = `"shop:tokens";q=4000;w=60`

	for i, s := range []struct {
		user, query string
		answer      int // 0: no answer written
		code        int
		limit, body string
		left        int // alice's tokens left afterwards
	}{
		{"alice", "?max_tokens=800", 300, 200, `"shop:tokens";r=3200;t=60`,
			`{"user":"alice","estimated_tokens":800,"actual_tokens":300}`, 3700},
		// No max_tokens: 256 reserved, and an answer of 900 charged 644 more.
		{"alice", "", 900, 200, `"shop:tokens";r=3444;t=60`,
			`{"user":"alice","estimated_tokens":256,"actual_tokens":900}`, 2800},
		{"alice", "?max_tokens=1001", 0, 400, "", `{"error":"max_tokens must be a number from 1 to 1000"}`, 2800},
		{"alice", "?max_tokens=many", 0, 400, "", "", 2800},
		{"alice", "?max_tokens=1000", 1000, 200, `"shop:tokens";r=1800;t=60`, "", 1800},
		{"alice", "?max_tokens=1000", 1000, 200, `"shop:tokens";r=800;t=60`, "", 800},
		// 800 left: a request that may need 1000 waits for the window.
		{"alice", "?max_tokens=1000", 0, 429, `"shop:tokens";r=800;t=60`, "", 800},
		{"alice", "?max_tokens=800", 5, 200, `"shop:tokens";r=0;t=60`, "", 795},
		{"bob", "?max_tokens=1000", 10, 200, `"shop:tokens";r=3000;t=60`,
			`{"user":"bob","estimated_tokens":1000,"actual_tokens":10}`, 795},
		{"", "?max_tokens=10", 0, 403, "", "", 795},
	} {
		if s.answer > 0 {
			answers = append(answers, s.answer)
		}
		header := []string{userHeader, s.user}
		if s.user == "" {
			header = nil
		}
		w := shopRequest(shop, "POST", "/complete"+s.query, alice, header...)
		if w.Code != s.code || w.Header().Get("RateLimit") != s.limit ||
			(s.limit != "" && w.Header().Get("RateLimit-Policy") != policy) ||
			(s.body != "" && w.Body.String() != s.body+"\n") {
			t.Fatalf("request %d: %d %q %q %s", i+1, w.Code, w.Header().Get("RateLimit"), w.Header().Get("RateLimit-Policy"), w.Body)
		}
		if len(answers) > 0 {
			t.Fatalf("request %d: no answer was written", i+1)
		}
		if s.code == http.StatusTooManyRequests && w.Header().Get("Retry-After") != "60" {
			t.Fatalf("request %d: Retry-After %q", i+1, w.Header().Get("Retry-After"))
		}
		if r, err := lim.Peek(t.Context(), tokensRule, "user:alice"); err != nil || r.Remaining != s.left {
			t.Fatalf("request %d: alice has %d tokens left (%v), want %d", i+1, r.Remaining, err, s.left)
		}
	}
}
