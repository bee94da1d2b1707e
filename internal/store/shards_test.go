package store

import (
	"testing"
	"unsafe"
)

func TestShardsFor(t *testing.T) {
	for _, c := range []struct{ capacity, shards int }{{0, 1}, {1, 1}, {100, 1}, {127, 1}, {128, 2}, {256, 4}, {8191, 64}, {8192, 128}, {100_000, 128}, {10_000_000, 128}} {
		if got := ShardsFor(c.capacity); got != c.shards {
			t.Errorf("ShardsFor(%d) = %d, want %d", c.capacity, got, c.shards)
		}
	}
}

func TestShardsOf(t *testing.T) {
	for _, c := range []struct{ asked, made int }{{1, 1}, {3, 4}, {4, 4}, {128, 128}} {
		s := NewShards[int64](c.asked)
		if s.Len() != c.made {
			t.Fatalf("NewShards(%d): %d shards, want %d", c.asked, s.Len(), c.made)
		}
		for i := range s.Len() {
			*s.At(i) = int64(i)
		}
		// The upper half of the hash picks the shard; the lower half
		// does not.
		for i := range 2 * s.Len() {
			h := uint64(i)<<32 | 0xdeadbeef
			if got, want := *s.Of(h), int64(i%c.made); got != want {
				t.Fatalf("%d shards: Of(%#x) is shard %d, want %d", c.made, h, got, want)
			}
		}
	}
}

// TestShardsApart: the state of two neighbouring shards is at least a
// cacheLine apart, so that no write to one takes the other's line.
func TestShardsApart(t *testing.T) {
	type state struct{ a, b int64 }
	s := NewShards[state](4)
	for i := 1; i < s.Len(); i++ {
		end := uintptr(unsafe.Pointer(s.At(i-1))) + unsafe.Sizeof(state{})
		if gap := uintptr(unsafe.Pointer(s.At(i))) - end; gap < cacheLine {
			t.Fatalf("shards %d and %d: %d bytes apart, want at least %d", i-1, i, gap, cacheLine)
		}
	}
}
