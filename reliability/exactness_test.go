package reliability_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// stampClock is a clock shared by several limiters: every reading is one
// microsecond later than the one before (time starts at the wall clock and
// moves only as it is read), and the time each call was decided at is
// recorded (see readings).
type stampClock struct {
	readings
	base  time.Time
	ticks atomic.Int64
}

func newStampClock() *stampClock {
	return &stampClock{base: time.Now().Truncate(time.Microsecond)}
}

func (c *stampClock) Now() time.Time {
	t := c.base.Add(time.Duration(c.ticks.Add(1)) * time.Microsecond)
	c.note(t)
	return t
}

// TestExactnessUnderLoad runs four limiters, each with its own rueidis
// client like four instances of an application, with 64 goroutines each,
// against one key on a real redis-server and on a Redis Cluster. The
// Timeout is generous, so no call may be Degraded.
//
//   - moving: a shared clock that advances one µs per reading; the window is
//     400 readings long, so it slides many times. The
//     decision time of every call is known: no interval of one window may
//     hold more than Rate allowed calls, and Redis' own log agrees with the
//     calls (every member's score is the time of an allowed call, and after a
//     last call it counts exactly the allowed calls of the last window).
//     The same with every call serialized by one mutex is the control: the
//     calls then reach Redis in timestamp order. Concurrent calls reach it
//     in any order, which counting by time (and keeping a window more than
//     counting needs) makes harmless.
//     local/moving does the same on one local-only limiter.
//   - instant: a fake clock that stands still: exactly Rate calls pass.
func TestExactnessUnderLoad(t *testing.T) {
	stores := realStores(t)
	if stores == nil {
		t.Skip("needs redis-server and redis-cli")
	}
	const instances, goroutines = 4, 64
	t.Run("local/moving", func(t *testing.T) { testMovingClock(t, nil, false) })
	t.Run("local/moving-serialized", func(t *testing.T) { testMovingClock(t, nil, true) })
	for _, st := range stores {
		for _, serial := range []bool{false, true} {
			name := st.name + "/moving"
			if serial {
				name += "-serialized"
			}
			t.Run(name, func(t *testing.T) { testMovingClock(t, &st, serial) })
		}
		t.Run(st.name+"/instant", func(t *testing.T) {
			clk := testkit.NewClock()
			opts := testkit.Isolated(ratelimit.Options{Clock: clk, Timeout: 10 * time.Second})
			const rate = 500
			rule := ratelimit.Rule{Name: "instant", Limit: ratelimit.PerMinute(rate)}
			logKey, _ := layoutKeys(opts.KeyPrefix, rule.Name, "hot")
			var allowed, calls atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < instances; i++ {
				l := testkit.NewLimiter(t, testkit.NewClient(t, st.addrs...), opts)
				for g := 0; g < goroutines; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for k := 0; k < 4; k++ {
							r, err := l.Allow(context.Background(), rule, "hot")
							calls.Add(1)
							if err != nil || r.Degraded {
								t.Errorf("Allow = %+v, %v", r, err)
								return
							}
							if r.Allowed {
								allowed.Add(1)
							}
						}
					}()
				}
			}
			close(start)
			wg.Wait()
			if allowed.Load() != rate {
				t.Errorf("%d of %d calls allowed at one instant, want exactly %d", allowed.Load(), calls.Load(), rate)
			}
			if n := st.zcard(t, logKey); n != rate {
				t.Errorf("ZCARD = %d, want %d", n, rate)
			}
		})
	}
}

// testMovingClock is TestExactnessUnderLoad/*/moving: with serial set, one
// mutex makes every call (its clock reading and its script) run alone, so
// calls reach Redis in timestamp order: the control for the concurrent run.
//
// With st nil it runs one local-only limiter with 256 goroutines instead:
// the local path reads the time before it takes the key's lock, so it meets
// the same reordering.
func testMovingClock(t *testing.T, st *realStore, serial bool) {
	const instances, goroutines = 4, 64
	clk := newStampClock()
	opts := testkit.Isolated(ratelimit.Options{Clock: clk, Timeout: 10 * time.Second})
	var ls []*ratelimit.Limiter
	for i := 0; i < instances; i++ {
		if st == nil {
			if i == 0 {
				ls = append(ls, testkit.NewLimiter(t, nil, opts))
			} else {
				ls = append(ls, ls[0])
			}
			continue
		}
		ls = append(ls, testkit.NewLimiter(t, testkit.NewClient(t, st.addrs...), opts))
	}
	const rate = 8
	rule := ratelimit.Rule{Name: "moving", Limit: ratelimit.Limit{Rate: rate, Window: 400 * time.Microsecond}}
	logKey, _ := layoutKeys(opts.KeyPrefix, rule.Name, "hot")

	var mu, serialMu sync.Mutex
	var allowed []int64
	var calls, degraded atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range ls {
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if serial {
						serialMu.Lock()
					}
					clk.begin()
					r, err := l.Allow(context.Background(), rule, "hot")
					at := clk.end(t)
					if serial {
						serialMu.Unlock()
					}
					calls.Add(1)
					if err != nil {
						t.Errorf("Allow: %v", err)
						return
					}
					if r.Degraded {
						degraded.Add(1)
					}
					if r.Allowed {
						mu.Lock()
						allowed = append(allowed, at)
						mu.Unlock()
					}
				}
			}()
		}
	}
	time.Sleep(600 * time.Millisecond)
	close(stop)
	wg.Wait()
	if degraded.Load() != 0 {
		t.Fatalf("%d of %d calls were degraded with a 10s Timeout", degraded.Load(), calls.Load())
	}
	slices.Sort(allowed)
	w := rule.Limit.Window.Microseconds()
	most, i := 0, 0
	var worst []int64
	for j := range allowed {
		for allowed[j]-allowed[i] >= w {
			i++
		}
		if n := j - i + 1; n > most {
			most, worst = n, allowed[i:j+1]
		}
	}
	span := time.Duration(clk.ticks.Load()) * time.Microsecond
	t.Logf("%d calls, %d allowed over %v of clock (%d windows); most allowed in one window: %d (rate %d)",
		calls.Load(), len(allowed), span, span/rule.Limit.Window, most, rate)
	if most > rate {
		t.Errorf("%d calls allowed within %v, rate %d; their times (µs after the first): %v",
			most, rule.Limit.Window, rate, offsets(worst))
	}

	// Redis' own log: a last call trims it at a known time.
	clk.begin()
	last, err := ls[0].Allow(context.Background(), rule, "hot")
	lastAt := clk.end(t)
	if err != nil || last.Degraded {
		t.Fatalf("last call = %+v, %v", last, err)
	}
	if last.Allowed {
		allowed = append(allowed, lastAt)
	}
	isAllowed := map[int64]int{}
	inLast := 0
	for _, at := range allowed {
		isAllowed[at]++
		if at > lastAt-w {
			inLast++
		}
	}
	if st == nil {
		return
	}
	flat := strings.Split(mustDo(t, st.node(t, logKey), "ZRANGE", logKey, "0", "-1", "WITHSCORES"), "\n")
	for k := 0; k+1 < len(flat); k += 2 {
		score, err := strconv.ParseInt(flat[k+1], 10, 64)
		if err != nil || isAllowed[score] == 0 {
			t.Errorf("Redis' log holds %q at %q, the time of no allowed call", flat[k], flat[k+1])
		}
	}
	live := mustInt(t, st.node(t, logKey), "ZCOUNT", logKey, "("+strconv.FormatInt(lastAt-w, 10), "+inf")
	if live != inLast {
		t.Errorf("Redis counts %d events in the last call's window; allowed calls in it: %d", live, inLast)
	}
}

// offsets renders times relative to the first one.
func offsets(times []int64) string {
	if len(times) == 0 {
		return "[]"
	}
	parts := make([]string, len(times))
	for i, at := range times {
		parts[i] = fmt.Sprint(at - times[0])
	}
	return "[" + strings.Join(parts, " ") + "]"
}
