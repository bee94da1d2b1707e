package httplimit_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/policy"
)

// source is a policy.RuleSource whose rules a test changes, as a reloaded
// rules file would: rules by name, and per-key overrides of them.
type source struct {
	mu        sync.Mutex
	rules     map[string]ratelimit.Rule
	overrides map[string]ratelimit.Rule // by name + "/" + key
}

func (s *source) For(name, key string) (ratelimit.Rule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.overrides[name+"/"+key]; ok {
		return r, true
	}
	r, ok := s.rules[name]
	return r, ok
}

func (s *source) set(r ratelimit.Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules[r.Name] = r
}

func (s *source) drop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rules, name)
}

// TestRulesFromASource limits a route by a rule its source changes: the
// change applies from the next request, to the key's existing log, and a
// key with an override (the key as the KeyFunc writes it) gets its own
// limit under the same name.
func TestRulesFromASource(t *testing.T) {
	e := newEnv(t)
	coupon := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(2)}
	gold := coupon
	gold.Limit.Rate = 3
	src := &source{rules: map[string]ratelimit.Rule{"coupon": coupon}, overrides: map[string]ratelimit.Rule{"coupon/header:X-User:gold": gold}}
	var errs []error
	opts := httplimit.Options{Logger: discard, OnError: func(w http.ResponseWriter, r *http.Request, err error) {
		errs = append(errs, err)
		w.WriteHeader(http.StatusInternalServerError)
	}}
	policies := []httplimit.Policy{{Rules: src, RuleName: "coupon", Key: httplimit.Header("X-User")}}
	if err := httplimit.Validate(e.lim, policies, opts); err != nil {
		t.Fatal(err)
	}
	h := httplimit.Stack(e.lim, policies, opts)(ok)
	user := func(id string) *http.Response { return get(h, peer, "X-User", id) }

	check(t, user("alice"), want{status: 200, policy: `"coupon";q=2;w=60`, limit: `"coupon";r=1;t=60`})
	check(t, user("alice"), want{status: 200, policy: `"coupon";q=2;w=60`, limit: `"coupon";r=0;t=60`})
	check(t, user("alice"), want{status: 429, policy: `"coupon";q=2;w=60`, limit: `"coupon";r=0;t=60`, retryAfter: "60"})
	for _, r := range []string{"2", "1", "0"} {
		check(t, user("gold"), want{status: 200, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=` + r + `;t=60`})
	}
	check(t, user("gold"), want{status: 429, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=0;t=60`, retryAfter: "60"})

	// The rule changes: alice's two events count under the new limit.
	src.set(ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(4)})
	check(t, user("alice"), want{status: 200, policy: `"coupon";q=4;w=60`, limit: `"coupon";r=1;t=60`})
	check(t, user("alice"), want{status: 200, policy: `"coupon";q=4;w=60`, limit: `"coupon";r=0;t=60`})
	check(t, user("alice"), want{status: 429, policy: `"coupon";q=4;w=60`, limit: `"coupon";r=0;t=60`, retryAfter: "60"})

	// The rule disappears from the source: the request fails, closed.
	src.drop("coupon")
	if res := user("bob"); res.StatusCode != http.StatusInternalServerError {
		t.Fatalf("a rule missing from the source: status %d", res.StatusCode)
	}
	if len(errs) != 1 || !errors.Is(errs[0], policy.ErrUnknownRule) {
		t.Fatalf("OnError got %v; want one error wrapping policy.ErrUnknownRule", errs)
	}
}

// TestRulesFromASourceSetup checks the startup checks of a policy whose
// rule comes from a source.
func TestRulesFromASourceSetup(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(2)}
	src := &source{rules: map[string]ratelimit.Rule{"coupon": rule, "bad": {Name: "bad"}}}
	key := httplimit.Global()
	for _, c := range []struct {
		name string
		p    httplimit.Policy
		also error
	}{
		{"Rule and Rules", httplimit.Policy{Rule: rule, Rules: src, RuleName: "coupon", Key: key}, nil},
		{"Rules without RuleName", httplimit.Policy{Rules: src, Key: key}, nil},
		{"RuleName without Rules", httplimit.Policy{Rule: rule, RuleName: "coupon", Key: key}, nil},
		{"a rule the source lacks", httplimit.Policy{Rules: src, RuleName: "cupon", Key: key}, policy.ErrUnknownRule},
		{"an invalid rule in the source", httplimit.Policy{Rules: src, RuleName: "bad", Key: key}, ratelimit.ErrInvalidRule},
		{"no Key", httplimit.Policy{Rules: src, RuleName: "coupon"}, nil},
	} {
		err := httplimit.Validate(e.lim, []httplimit.Policy{c.p}, httplimit.Options{})
		if !errors.Is(err, httplimit.ErrInvalidSetup) || c.also != nil && !errors.Is(err, c.also) {
			t.Errorf("%s: Validate = %v", c.name, err)
		}
	}
	// The name clients see defaults to RuleName.
	h := httplimit.Stack(e.lim, []httplimit.Policy{{Rules: src, RuleName: "coupon", Key: key}}, httplimit.Options{})(ok)
	check(t, get(h, peer), want{status: 200, policy: `"coupon";q=2;w=60`, limit: `"coupon";r=1;t=60`})
	h = httplimit.Stack(e.lim, []httplimit.Policy{{Name: "claims", Rules: src, RuleName: "coupon", Key: key}}, httplimit.Options{})(ok)
	check(t, get(h, peer), want{status: 200, policy: `"claims";q=2;w=60`, limit: `"claims";r=0;t=60`})
}
