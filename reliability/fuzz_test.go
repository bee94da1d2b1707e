package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// Fuzz tests over hostile rule names, keys and n, on the local path and on
// miniredis. `go test` runs the f.Add seeds and the corpus committed under
// testdata/fuzz/<FuzzName>/ as ordinary tests; to fuzz:
//
//	go test -run '^$' -fuzz '^FuzzLimiterInput$' -fuzztime 60s
//	go test -run '^$' -fuzz '^FuzzPairIsolation$' -fuzztime 60s
//
// rueidis talks to miniredis as to a Redis Cluster (miniredis answers
// CLUSTER SLOTS) and panics before sending a script whose keys lie in two
// slots, so every input also checks that both keys of a pair share a hash
// tag, whatever braces the name and key hold.

// fuzzPair is a local-only limiter and a miniredis limiter whose fake clocks
// move together, on state no other input has touched.
type fuzzPair struct {
	local, remote *ratelimit.Limiter
	clocks        [2]interface {
		Set(time.Time)
	}
}

// fuzzEnv starts one miniredis and one client for a fuzz target; each input
// gets limiters with a key prefix of its own.
func fuzzEnv(f *testing.F) func(t *testing.T) fuzzPair {
	mr := miniredis.RunT(f)
	client := testkit.NewClient(f, mr.Addr())
	var n int
	return func(t *testing.T) fuzzPair {
		n++
		lc, rc := testkit.NewClock(), testkit.NewClock()
		local, err := ratelimit.New(nil, testkit.Options(lc))
		if err != nil {
			t.Fatal(err)
		}
		opts := testkit.Options(rc)
		opts.KeyPrefix = fmt.Sprintf("f%d:", n)
		remote, err := ratelimit.New(client, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { local.Close(); remote.Close() })
		return fuzzPair{local: local, remote: remote, clocks: [2]interface{ Set(time.Time) }{lc, rc}}
	}
}

// checkSentinel fails the test unless err is nil or one of the documented
// input errors.
func checkSentinel(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, ratelimit.ErrInvalidRule) || errors.Is(err, ratelimit.ErrInvalidKey) || errors.Is(err, ratelimit.ErrInvalidN) {
		return
	}
	t.Fatalf("%s: error %v is none of ErrInvalidRule, ErrInvalidKey, ErrInvalidN", what, err)
}

// FuzzLimiterInput runs a short sequence of calls, driven by ops, with a
// fuzzed rule name, key, rate and n, on both paths: nothing panics, every
// error is a documented sentinel, and both paths answer the same.
func FuzzLimiterInput(f *testing.F) {
	f.Add("coupon:claim", "user42", 3, 1, []byte{0, 0, 0, 0, 8, 2, 3, 1})
	f.Add("x", "a:b", 1, 2, []byte{0, 1, 2})
	f.Add("{r}", "}{", 2, 2, []byte{1, 1, 0, 4, 2})
	f.Add("", "k", 1, 1, []byte{0})
	f.Add("r", "", 1, 1, []byte{0, 2, 3})
	f.Add("r", "k", 0, 1, []byte{0})
	f.Add("r", "k", 5, 0, []byte{1})
	f.Add("r", "k", 5, 6, []byte{1})
	f.Add("r%7D", "%25\x00\xff", 4, 3, []byte{1, 5, 9, 0, 0, 0, 0, 0})
	f.Add(string(make([]byte, 257)), "k", 1, 1, []byte{0})
	f.Add("\xff\xfe", string(make([]byte, 300)), 2, 1, []byte{0, 0, 0, 250, 0})
	newPair := fuzzEnv(f)
	f.Fuzz(func(t *testing.T, name, key string, rate, n int, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		rule := ratelimit.Rule{Name: name, Limit: ratelimit.Limit{Rate: rate % 1000, Window: time.Second}}
		p := newPair(t)
		ctx := context.Background()
		now := testkit.Epoch()
		for i, op := range ops {
			now = now.Add(time.Duration(op>>2) * 10 * time.Millisecond)
			p.clocks[0].Set(now)
			p.clocks[1].Set(now)
			var out [2]diffOutcome
			for j, l := range []*ratelimit.Limiter{p.local, p.remote} {
				var err error
				switch op % 4 {
				case 0:
					out[j].res, err = l.Allow(ctx, rule, key)
				case 1:
					out[j].res, err = l.AllowN(ctx, rule, key, n%2000+int(op>>4))
				case 2:
					out[j].res, err = l.Peek(ctx, rule, key)
				case 3:
					err = l.Reset(ctx, rule, key)
				}
				checkSentinel(t, fmt.Sprintf("op %d (%d)", i, op%4), err)
				if err != nil {
					out[j].err = err.Error()
				}
				if out[j].res.Degraded {
					t.Fatalf("op %d: a degraded result with miniredis up: %+v", i, out[j].res)
				}
			}
			if out[0] != out[1] {
				t.Fatalf("op %d (%d) at epoch%+v, rule %q rate %d, key %q:\nlocal     %v\nminiredis %v",
					i, op%4, now.Sub(testkit.Epoch()), name, rule.Limit.Rate, key, out[0], out[1])
			}
		}
	})
}

// FuzzPairIsolation: one event under (name1, key1) with Rate 1 leaves
// (name2, key2) untouched unless the two pairs are the same, on both paths.
// Names and keys that would collide if joined naively ("x"+"a:b" and
// "x:a"+"b", "}" and "%7D", braces) must not share state; long keys are
// replaced by their digest, which only equal keys share.
func FuzzPairIsolation(f *testing.F) {
	f.Add("x", "a:b", "x:a", "b")
	f.Add("x", "}", "x", "%7D")
	f.Add("x}", "k", "x%7D", "k")
	f.Add("{a", "b}", "{a}", "b")
	f.Add("r", "k", "r", "k")
	f.Add("r", "k\x00", "r", "k")
	f.Add("1:x", "y", "1", "x:=y")
	newPair := fuzzEnv(f)
	f.Fuzz(func(t *testing.T, name1, key1, name2, key2 string) {
		r1 := ratelimit.Rule{Name: name1, Limit: ratelimit.PerMinute(1)}
		r2 := ratelimit.Rule{Name: name2, Limit: ratelimit.PerMinute(1)}
		p := newPair(t)
		ctx := context.Background()
		for _, l := range []*ratelimit.Limiter{p.local, p.remote} {
			first, err := l.Allow(ctx, r1, key1)
			checkSentinel(t, "first", err)
			if err != nil {
				continue
			}
			if !first.Allowed {
				t.Fatalf("first call on a fresh pair (%q, %q) was rejected: %+v", name1, key1, first)
			}
			second, err := l.Peek(ctx, r2, key2)
			checkSentinel(t, "second", err)
			if err != nil {
				continue
			}
			same := name1 == name2 && key1 == key2
			if second.Allowed == same {
				t.Fatalf("after one event on (%q, %q), Peek on (%q, %q) = %+v; the pairs are %s",
					name1, key1, name2, key2, second, map[bool]string{true: "the same", false: "different"}[same])
			}
		}
	})
}
