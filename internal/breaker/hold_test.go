package breaker

import (
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/redisio"
)

// A hold is taken only while the breaker is not closed, and keeps Owes
// true after the breaker closes, until it is released.
func TestHoldOutlivesTheOpening(t *testing.T) {
	const probeAfter = 20 * time.Millisecond
	b := New("redis", config(1, probeAfter), redisio.NewGate(time.Second))
	if b.Hold() {
		t.Fatal("a closed breaker gave a hold")
	}
	if b.Owes() {
		t.Fatal("a closed breaker with no hold owes")
	}
	call(b, errOutage)
	if !b.Owes() {
		t.Fatal("an open breaker does not owe")
	}
	if !b.Hold() || !b.Hold() {
		t.Fatal("an open breaker gave no hold")
	}
	time.Sleep(probeAfter + 5*time.Millisecond)
	if ran, _ := call(b, nil); !ran || b.State() != Closed {
		t.Fatalf("a successful probe: ran %v, state %v", ran, b.State())
	}
	for i := 2; i > 0; i-- {
		if !b.Owes() {
			t.Fatalf("closed with %d holds: Owes is false", i)
		}
		b.Release()
	}
	if b.Owes() {
		t.Fatal("closed, every hold released: Owes is true")
	}
}
