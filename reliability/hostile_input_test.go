package reliability_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestHostileKeysAndNames runs hostile keys and rule names on the local
// limiter, miniredis, a redis-server and a Redis Cluster:
//
//   - an empty key is ErrInvalidKey for every method;
//   - two 1 MiB keys that differ only in their last byte work and never share
//     state, Reset included, and Redis stores each under a short digest key,
//     never the 1 MiB;
//   - keys of invalid UTF-8, NUL bytes and braces (which would move the hash
//     tag if they were not escaped), and rule names and keys that collide when
//     joined naively ("x"+"a:b" and "x:a"+"b", "}" and "%7D", a rule name that
//     looks like the length prefix), each keep exactly their own one event:
//     nothing is shared and nothing is lost; Redis holds each under exactly
//     the documented key.
func TestHostileKeysAndNames(t *testing.T) {
	ctx := context.Background()
	type store struct {
		name string
		rs   *realStore // nil for the local limiter
	}
	stores := []store{{name: "local"}}
	mini := miniredisStore(t)
	stores = append(stores, store{name: mini.name, rs: &mini})
	for _, rs := range realStores(t) {
		stores = append(stores, store{name: rs.name, rs: &rs})
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			var l *ratelimit.Limiter
			prefix := ""
			if st.rs == nil {
				l = testkit.NewLimiter(t, nil, testkit.Options(testkit.NewClock()))
			} else {
				l, prefix = st.rs.limiter(t, testkit.Options(testkit.NewClock()))
			}
			rule := ratelimit.Rule{Name: "hostile", Limit: ratelimit.PerMinute(2)}

			// The empty key.
			_, errA := l.Allow(ctx, rule, "")
			_, errN := l.AllowN(ctx, rule, "", 1)
			_, errP := l.Peek(ctx, rule, "")
			errR := l.Reset(ctx, rule, "")
			for i, err := range []error{errA, errN, errP, errR} {
				if !errors.Is(err, ratelimit.ErrInvalidKey) {
					t.Errorf("method %d with an empty key: %v, want ErrInvalidKey", i, err)
				}
			}

			// Two 1 MiB keys, one byte apart.
			big := strings.Repeat("k", 1<<20-1)
			a, b := big+"a", big+"b"
			steps := []struct {
				key       string
				peek      bool
				allowed   bool
				remaining int
			}{
				{a, false, true, 1}, {a, false, true, 0}, {b, false, true, 1},
				{a, false, false, 0}, {b, true, true, 1},
			}
			for i, s := range steps {
				var r ratelimit.Result
				var err error
				if s.peek {
					r, err = l.Peek(ctx, rule, s.key)
				} else {
					r, err = l.Allow(ctx, rule, s.key)
				}
				if err != nil || r.Allowed != s.allowed || r.Remaining != s.remaining || r.Degraded {
					t.Fatalf("1 MiB key, step %d (key ...%q): %+v, %v; want allowed=%v remaining=%d",
						i, s.key[len(s.key)-1:], r, err, s.allowed, s.remaining)
				}
			}
			if err := l.Reset(ctx, rule, a); err != nil {
				t.Fatalf("Reset of a 1 MiB key: %v", err)
			}
			if ra, _ := l.Peek(ctx, rule, a); ra.Remaining != 2 {
				t.Errorf("after Reset(a): Peek(a) = %+v, want Remaining 2", ra)
			}
			if rb, _ := l.Peek(ctx, rule, b); rb.Remaining != 1 {
				t.Errorf("Reset(a) touched b: Peek(b) = %+v, want Remaining 1", rb)
			}
			if st.rs != nil {
				logB, _ := layoutKeys(prefix, rule.Name, b)
				if len(logB) > 200 || !strings.Contains(logB, ":#") {
					t.Fatalf("layoutKeys gave %d bytes for a 1 MiB key", len(logB))
				}
				if n := st.rs.zcard(t, logB); n != 1 {
					t.Errorf("the digest key %q holds %d events, want 1", logB, n)
				}
				longest := 0
				for _, node := range st.rs.all {
					for _, k := range strings.Split(mustDo(t, node, "KEYS", prefix+"*"), "\n") {
						longest = max(longest, len(k))
					}
				}
				if longest > 200 {
					t.Errorf("Redis holds a key of %d bytes: a long key was stored as it is", longest)
				}
			}

			// Pairs that collide when joined naively, and hostile bytes.
			type pair struct{ rule, key string }
			pairs := []pair{
				{"x", "a:b"}, {"x:a", "b"},
				{"x", "}"}, {"x", "%7D"}, {"x", "%"}, {"x", "%25"},
				{"x}", "k"}, {"x%7D", "k"},
				{"1:x", "y"}, {"1", "x:=y"}, {"3:x", "y"},
				{"a", "#0"}, {"a", "=0"},
				{"r", "{a}"}, {"r", "{a}b"}, {"r", "a}"}, {"r", "{"}, {"r", "{}"}, {"{r}", "a"},
				{"r", "\xff\xfe"}, {"r", "\xff\xff"}, {"r", "\xc3\x28"}, {"\xff", "r"},
				{"r", "k\x00"}, {"r", "k"}, {"r", "\x00"}, {"r\x00", "k"},
			}
			one := func(p pair) ratelimit.Rule {
				return ratelimit.Rule{Name: p.rule, Limit: ratelimit.PerMinute(1)}
			}
			for _, p := range pairs {
				if r, err := l.Allow(ctx, one(p), p.key); err != nil || !r.Allowed || r.Degraded {
					t.Fatalf("first call on (%q, %q) = %+v, %v; want allowed: it shares state with an earlier pair", p.rule, p.key, r, err)
				}
			}
			for _, p := range pairs {
				if r, err := l.Peek(ctx, one(p), p.key); err != nil || r.Allowed || r.Remaining != 0 {
					t.Fatalf("Peek on (%q, %q) after its one event = %+v, %v; want full: its event was lost", p.rule, p.key, r, err)
				}
				if st.rs != nil {
					logKey, _ := layoutKeys(prefix, p.rule, p.key)
					if n := st.rs.zcard(t, logKey); n != 1 {
						t.Errorf("(%q, %q): the documented key %q holds %d events, want 1", p.rule, p.key, logKey, n)
					}
				}
			}
		})
	}
}
