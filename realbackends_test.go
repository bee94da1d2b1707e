package ratelimit_test

import (
	"net"
	"testing"
	"time"
)

// realBackends returns backends on real Redis servers; they arrive with
// internal/redistest.
func realBackends(t testing.TB) []backend { return nil }

func dialer() net.Dialer { return net.Dialer{Timeout: time.Second} }
