package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// TestFlashSaleAcrossRedisRestart is `-serve` on a real redis-server under
// `hey -z 20s -c 100`: 100 connections order in a closed loop on the real
// clock and the limiter's default Options; Redis is killed at 3s, so that
// the first window's orders leave it during the outage, and restarted at
// 12s (it lost its data). The orders accepted whose whole request and
// response fall inside one interval shorter than the sale's 10-second
// window are at most 100: before the outage, during it and after Redis
// came back (the run of this admitted 114 and 126).
func TestFlashSaleAcrossRedisRestart(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	redis := redistest.Start(t, redistest.Options{})
	lim, err := ratelimit.Dial(rueidis.ClientOption{InitAddress: []string{redis.Addr()}},
		ratelimit.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	srv := httptest.NewServer(newShop(lim, httplimit.IPOptions{}))
	defer srv.Close()

	var (
		mu       sync.Mutex
		accepted []testkit.Span
		statuses = map[int]int{}
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	const conns = 100
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns}}
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, err := client.Post(srv.URL+"/flash-sale/orders", "application/json", nil)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				end := time.Now()
				mu.Lock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusCreated {
					accepted = append(accepted, testkit.Span{Start: start, End: end, N: 1})
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(3 * time.Second)
	redis.Kill()
	time.Sleep(9 * time.Second)
	redis.Restart()
	time.Sleep(8 * time.Second)
	close(stop)
	wg.Wait()

	s := lim.Stats()
	t.Logf("statuses %v; %d outage decisions, %d shed, %d written back", statuses, s.OutageDecisions, s.ShedDecisions, s.WrittenBack)
	for code := range statuses {
		if code != http.StatusCreated && code != http.StatusTooManyRequests {
			t.Errorf("%d responses with status %d", statuses[code], code)
		}
	}
	most, _ := testkit.MostContained(accepted, flashSaleRule.Limit.Window)
	if most > flashSaleRule.Limit.Rate {
		t.Fatalf("%d orders accepted inside one window across the restart, at most %d", most, flashSaleRule.Limit.Rate)
	}
	if most < flashSaleRule.Limit.Rate {
		t.Fatalf("%d orders accepted inside one window, want the whole %d (100 connections take them within the first second)", most, flashSaleRule.Limit.Rate)
	}
}
