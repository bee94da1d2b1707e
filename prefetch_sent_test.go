package ratelimit_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// steppedClock is a fake clock that, once armed, moves on by step right
// after the first reading the armed goroutine takes: as if the calling
// goroutine waited between the call's time and the time it sent its
// request (a call that waits for another's request on its way, then asks
// itself, asks at its own time: prefetch.go's fromGrant). Other
// goroutines' readings (the write-back's loop) neither move it nor take
// the arming.
type steppedClock struct {
	mu    sync.Mutex
	now   time.Time
	goid  uint64 // armed for this goroutine (0: not armed)
	step  time.Duration
	reads int
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goid != 0 && goid() == c.goid {
		if c.reads++; c.reads == 1 {
			t := c.now
			c.now = c.now.Add(c.step)
			return t
		}
	}
	return c.now
}

func (c *steppedClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.goid, c.reads = t, 0, 0
}

// arm moves the clock on by step after the calling goroutine's next reading.
func (c *steppedClock) arm(step time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.goid, c.step, c.reads = goid(), step, 0
}

// goid is the calling goroutine's id, from its stack's first line.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// TestPrefetchUsableFromTheGrantsTime: a process that sends Redis its own
// time (Options.Clock; a quota always) has its slots taken at that time,
// the call's, which is earlier than the time it sent the request when the
// call waited first: the slots are usable until their stamp (the exact
// log) or their window's end (the other kinds) from the call's time, not
// from the send's. Measured from the send, the process used a slot after
// its stamp, or in the next window, where Redis never counted it: more
// than Rate in one window.
func TestPrefetchUsableFromTheGrantsTime(t *testing.T) {
	ctx := context.Background()
	const step = 3 * time.Millisecond
	epoch := testkit.Epoch()
	// A fixed window and a day's quota (which sends the call's time with
	// the real clock too): the call asks for 3 slots 5ms before its
	// window or period ends, and sends at 2ms before; Redis gives them
	// the 5ms left. In the next window another process takes all of it,
	// and the slots left are not usable there.
	for _, c := range []struct {
		name string
		rule ratelimit.Rule
		end  time.Time
	}{
		{"fixed window", ratelimit.Rule{Name: "r", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 20 * time.Millisecond},
			epoch.Add(876544 * time.Microsecond)}, // the end of Epoch's window
		{"calendar quota", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 10, Period: ratelimit.Day}, Prefetch: 20 * time.Millisecond},
			time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}, // the end of Epoch's day
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &steppedClock{now: c.end.Add(-5 * time.Millisecond)}
			a, b := twoOn(t, clk)
			mustAllow(t, a, c.rule, 1, true)
			mustAllow(t, a, c.rule, 1, true)
			clk.arm(step)
			mustAllow(t, a, c.rule, 1, true)
			clk.set(c.end.Add(time.Millisecond))
			mustAllow(t, b, c.rule, 10, true)
			if r, _ := a.Allow(ctx, c.rule, "k"); r.Allowed {
				t.Errorf("allowed at the next window's start from a slot of the one before: 11 in a window of 10")
			}
		})
	}
	t.Run("sliding log", func(t *testing.T) {
		rule := ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 20 * time.Millisecond}
		clk := &steppedClock{now: epoch}
		a, b := twoOn(t, clk)
		mustAllow(t, a, rule, 1, true)
		mustAllow(t, a, rule, 1, true)
		// The call reads epoch; its request leaves at epoch + 3ms, at a
		// reading after its wait, which Redis stamps the three slots
		// from: epoch + 23ms, usable until then.
		clk.arm(step)
		mustAllow(t, a, rule, 1, true)
		// Before the slots' stamp: from them.
		clk.set(epoch.Add(21 * time.Millisecond))
		mustAllow(t, a, rule, 1, true)
		a.Close() // the third slot goes back
		// A window after epoch + 20ms the log holds the two slots used,
		// stamped 23ms, no earlier than their uses: 8 fit, not 9.
		clk.set(epoch.Add(time.Second + 20*time.Millisecond))
		if r, _ := b.AllowN(ctx, rule, "k", 9); r.Allowed {
			t.Errorf("9 allowed at 1.02s: the slots used at 3ms and 21ms were stamped before 20ms, earlier than a use")
		}
		mustAllow(t, b, rule, 8, true)
	})
}

// twoOn returns two Limiters on one miniredis, on clk.
func twoOn(t *testing.T, clk ratelimit.Clock) (*ratelimit.Limiter, *ratelimit.Limiter) {
	mr := miniredis.RunT(t)
	opts := testkit.Options(clk)
	return testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts), testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
}

func mustAllow(t *testing.T, l *ratelimit.Limiter, r ratelimit.Rule, n int, want bool) {
	t.Helper()
	res, err := l.AllowN(context.Background(), r, "k", n)
	if err != nil || res.Allowed != want {
		t.Fatalf("AllowN(%d) = %+v, %v; want allowed %v", n, res, err, want)
	}
}

// TestPrefetchBanSeenElsewhere: a ban that a call taking no slot finds (a
// Peek here) closes the process' grant at once: its slots no longer admit.
func TestPrefetchBanSeenElsewhere(t *testing.T) {
	ctx := context.Background()
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 20 * time.Millisecond,
		Penalty: &ratelimit.Penalty{BanAfter: 2, BanFor: time.Second}}
	clk := &steppedClock{now: testkit.Epoch()}
	a, b := twoOn(t, clk)
	mustAllow(t, a, rule, 1, true)
	mustAllow(t, a, rule, 1, true)
	mustAllow(t, a, rule, 1, true) // hot: a grant of 3, one used
	if r, _ := a.Peek(ctx, rule, "k"); r.Remaining != 5 {
		t.Fatalf("Peek = %+v, want Remaining 5 (2 events and 3 slots)", r)
	}
	// Another process fills the key and is banned at its second violation.
	mustAllow(t, b, rule, 5, true)
	mustAllow(t, b, rule, 1, false)
	if r, _ := b.Allow(ctx, rule, "k"); !r.Banned {
		t.Fatalf("second violation: %+v, want Banned", r)
	}
	// a learns of the ban with a Peek: its two slots left admit no more.
	if r, _ := a.Peek(ctx, rule, "k"); !r.Banned {
		t.Fatalf("Peek after the ban = %+v, want Banned", r)
	}
	if r, err := a.Allow(ctx, rule, "k"); err != nil || r.Allowed {
		t.Errorf("Allow after a Peek saw the ban = %+v, %v: allowed from a slot of a banned key", r, err)
	}
}
