package ratelimit

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/redisio"
)

// Admission control (internal/redisio's Gate) bounds the calls in flight to
// one Redis master; a Redis Cluster's masters each have their own.

// masterRefresh is how often a Redis Cluster's slot map is read again, so
// that admission follows slots that moved to another master.
const masterRefresh = 10 * time.Second

// followMasters gives each master of a Redis Cluster an admission gate of
// its own, shared by the breakers of its slot ranges, reading the slot map
// (CLUSTER SLOTS) at once and then every masterRefresh until done is
// closed. A master keeps its gate across refreshes; until the first
// reading succeeds every range shares one gate. A range that straddles two
// masters goes with the later one.
func (c *redisConn) followMasters(done <-chan struct{}, timeout time.Duration) {
	gates := make(map[string]*redisio.Gate)
	for {
		c.assignGates(gates, timeout)
		select {
		case <-done:
			return
		case <-time.After(masterRefresh):
		}
	}
}

// assignGates reads the slot map once and points each breaker at the gate
// of its range's master, creating gates for masters not seen before.
func (c *redisConn) assignGates(gates map[string]*redisio.Gate, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ranges, err := c.client.Do(ctx, c.client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return // keep the gates as they are; the next refresh tries again
	}
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			continue
		}
		first, err1 := f[0].AsInt64()
		last, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || first < 0 || last >= redisio.ClusterSlots || first > last {
			continue
		}
		host, err1 := node[0].ToString()
		port, err2 := node[1].AsInt64()
		if err1 != nil || err2 != nil {
			continue
		}
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		g := gates[addr]
		if g == nil {
			g = redisio.NewGate(timeout)
			gates[addr] = g
		}
		c.breakers.SetGate(int(first), int(last), g)
	}
}
