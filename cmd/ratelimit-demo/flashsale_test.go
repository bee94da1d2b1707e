package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/redis/rueidis"
)

// TestFlashSaleUnderLoad sends the shop's flash sale 3,000 orders from 500
// connections at once, on the embedded Redis and the limiter's default
// Options (Timeout 100ms), as `-serve` runs it: exactly 100 are accepted in
// the window, whatever the load. (The clock stands still, so every order is
// in the one window; nothing here is timed.)
func TestFlashSaleUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("3,000 requests")
	}
	mr := miniredis.RunT(t)
	lim, err := ratelimit.Dial(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true},
		ratelimit.Options{Clock: ratelimittest.NewClock(storyStart), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	srv := httptest.NewServer(newShop(lim, httplimit.IPOptions{}))
	defer srv.Close()
	const conns, each = 500, 6
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns}}
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				resp, err := client.Post(srv.URL+"/flash-sale/orders", "application/json", nil)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusCreated:
					accepted.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := lim.Stats()
	t.Logf("%d accepted, %d refused; %d decisions shed, %d outage decisions, admission bound %d",
		accepted.Load(), refused.Load(), s.ShedDecisions, s.OutageDecisions, s.AdmissionLimit)
	if got := accepted.Load(); got != int64(flashSaleRule.Limit.Rate) {
		t.Fatalf("%d orders accepted, want exactly %d", got, flashSaleRule.Limit.Rate)
	}
}
