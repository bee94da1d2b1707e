package main

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// orderCrowd is conns connections ordering on a shop's flash sale in a
// closed loop, as `hey -c conns` does, until stop is closed: each order's
// status is counted, and an accepted one's request and response times
// are kept as a span, with the shop it was sent to.
type orderCrowd struct {
	mu       sync.Mutex
	statuses map[int]int
	accepted []shopSpan
	wg       sync.WaitGroup
}

// shopSpan is an order a shop accepted.
type shopSpan struct {
	shop int
	span testkit.Span
}

// order starts conns connections on the shop at url, numbered shop.
func (c *orderCrowd) order(t *testing.T, shop int, url string, conns int, stop <-chan struct{}) {
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns}}
	for range conns {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, err := client.Post(url+"/flash-sale/orders", "application/json", nil)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				end := time.Now()
				c.mu.Lock()
				if c.statuses == nil {
					c.statuses = map[int]int{}
				}
				c.statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusCreated {
					c.accepted = append(c.accepted, shopSpan{shop: shop, span: testkit.Span{Start: start, End: end, N: 1}})
				}
				c.mu.Unlock()
			}
		}()
	}
}

// checkStatuses fails the test for any status but 201 and 429.
func (c *orderCrowd) checkStatuses(t *testing.T) {
	t.Helper()
	for code, n := range c.statuses {
		if code != http.StatusCreated && code != http.StatusTooManyRequests {
			t.Errorf("%d responses with status %d", n, code)
		}
	}
}
