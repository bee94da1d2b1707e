package redisio

import (
	"testing"
)

func TestKeySlotMatchesRedisCluster(t *testing.T) {
	// Values from CLUSTER KEYSLOT on redis-server 7.0.
	for key, want := range map[string]int{
		"":                     0,
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363,
		"foo{{bar}}zap":        4015,
		"foo{bar}{zap}":        5061,
		"123456789":            12739,
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
