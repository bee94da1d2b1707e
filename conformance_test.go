package ratelimit_test

import (
	"testing"

	"github.com/ratelimit-go/ratelimit/internal/conformance"
)

// TestConformance runs the behaviour suite (internal/conformance) on the
// backends that need no server: the local limiter and an in-process
// miniredis. reliability/ runs the same suite on a real redis-server and a
// Redis Cluster.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Local(), conformance.Miniredis())
}
