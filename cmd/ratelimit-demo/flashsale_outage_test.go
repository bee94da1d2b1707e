package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
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

	var crowd orderCrowd
	stop := make(chan struct{})
	crowd.order(t, 0, srv.URL, 100, stop)
	time.Sleep(3 * time.Second)
	redis.Kill()
	time.Sleep(9 * time.Second)
	redis.Restart()
	time.Sleep(8 * time.Second)
	close(stop)
	crowd.wg.Wait()

	s := lim.Stats()
	t.Logf("statuses %v; %d outage decisions, %d shed, %d written back", crowd.statuses, s.OutageDecisions, s.ShedDecisions, s.WrittenBack)
	crowd.checkStatuses(t)
	var accepted []testkit.Span
	for _, o := range crowd.accepted {
		accepted = append(accepted, o.span)
	}
	most, _ := testkit.MostContained(accepted, flashSaleRule.Limit.Window)
	if most > flashSaleRule.Limit.Rate {
		t.Fatalf("%d orders accepted inside one window across the restart, at most %d", most, flashSaleRule.Limit.Rate)
	}
	if most < flashSaleRule.Limit.Rate {
		t.Fatalf("%d orders accepted inside one window, want the whole %d (100 connections take them within the first second)", most, flashSaleRule.Limit.Rate)
	}
}
