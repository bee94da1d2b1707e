package main

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
)

// TestShopExports: at most two exports run at once per user; a third
// started while two run is refused with 429 and a Retry-After; another
// user runs theirs; and once an export ends its slot is free again.
func TestShopExports(t *testing.T) {
	mr := miniredis.RunT(t)
	lim, err := ratelimit.New(newClient(t, mr.Addr()), ratelimit.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	defer func(d time.Duration) { exportTakes = d }(exportTakes)
	exportTakes = 500 * time.Millisecond
	shop := newShop(lim, httplimit.IPOptions{})
	const alice = "198.51.100.7:4000"

	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- shopRequest(shop, "POST", "/exports", alice, userHeader, "alice").Code
		}()
	}
	// Both exports run once alice has no slot left.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := lim.Peek(t.Context(), exportRule, "user:alice")
		if err == nil && r.Remaining == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice's two exports never both ran")
		}
		time.Sleep(time.Millisecond)
	}
	w := shopRequest(shop, "POST", "/exports", alice, userHeader, "alice")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a third export of alice's: %d %v; want 429 with Retry-After", w.Code, w.Header())
	}
	if w := shopRequest(shop, "POST", "/exports", alice, userHeader, "bob"); w.Code != http.StatusOK {
		t.Fatalf("bob's export while alice's run: %d", w.Code)
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("one of alice's exports got %d", c)
		}
	}
	if w := shopRequest(shop, "POST", "/exports", alice, userHeader, "alice"); w.Code != http.StatusOK {
		t.Fatalf("alice's export after hers ended: %d", w.Code)
	}
}
