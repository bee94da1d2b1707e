package grpclimit_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"github.com/ratelimit-go/ratelimit/policy"
	"google.golang.org/grpc/codes"
)

// source is a policy.RuleSource whose rules a test changes, as a reloaded
// rules file would.
type source struct {
	mu    sync.Mutex
	rules map[string]ratelimit.Rule
}

func (s *source) For(name, key string) (ratelimit.Rule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rules[name]
	return r, ok
}

func (s *source) set(name string, r ratelimit.Rule, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.rules[name] = r
	} else {
		delete(s.rules, name)
	}
}

// TestRulesFromASource limits a method by a rule its source changes: the
// change applies from the next call, and a rule that disappears fails the
// call, closed.
func TestRulesFromASource(t *testing.T) {
	e := newEnv(t)
	src := &source{rules: map[string]ratelimit.Rule{"health": {Name: "health", Limit: ratelimit.PerMinute(1)}}}
	methods := grpclimit.Methods{"*": {{Rules: src, RuleName: "health", Key: grpclimit.Global()}}}
	if err := grpclimit.Validate(e.lim, methods, grpclimit.Options{}); err != nil {
		t.Fatal(err)
	}
	c := unaryServer(t, e, "203.0.113.7:5555", methods, grpclimit.Options{Logger: discard})
	steps := []struct {
		change func()
		code   codes.Code
		policy string
	}{
		{nil, codes.OK, `"health";q=1;w=60`},
		{nil, codes.ResourceExhausted, `"health";q=1;w=60`},
		{func() { src.set("health", ratelimit.Rule{Name: "health", Limit: ratelimit.PerMinute(2)}, true) }, codes.OK, `"health";q=2;w=60`},
		{nil, codes.ResourceExhausted, `"health";q=2;w=60`},
		{func() { src.set("health", ratelimit.Rule{}, false) }, codes.Internal, ""},
	}
	for i, s := range steps {
		if s.change != nil {
			s.change()
		}
		o := call(t, c)
		if o.code != s.code || field(o.header, "ratelimit-policy") != s.policy {
			t.Fatalf("call %d: %v, ratelimit-policy %q; want %v, %q", i+1, o.code, field(o.header, "ratelimit-policy"), s.code, s.policy)
		}
	}
}

// TestRulesFromASourceSetup checks the startup checks of a policy whose
// rule comes from a source.
func TestRulesFromASourceSetup(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(2)}
	src := &source{rules: map[string]ratelimit.Rule{"r": rule, "bad": {Name: "bad"}}}
	key := grpclimit.Global()
	for _, c := range []struct {
		name string
		p    grpclimit.Policy
		also error
	}{
		{"Rule and Rules", grpclimit.Policy{Rule: rule, Rules: src, RuleName: "r", Key: key}, nil},
		{"Rules without RuleName", grpclimit.Policy{Rules: src, Key: key}, nil},
		{"RuleName without Rules", grpclimit.Policy{Rule: rule, RuleName: "r", Key: key}, nil},
		{"a rule the source lacks", grpclimit.Policy{Rules: src, RuleName: "q", Key: key}, policy.ErrUnknownRule},
		{"an invalid rule in the source", grpclimit.Policy{Rules: src, RuleName: "bad", Key: key}, ratelimit.ErrInvalidRule},
	} {
		err := grpclimit.Validate(e.lim, grpclimit.Methods{"*": {c.p}}, grpclimit.Options{})
		if !errors.Is(err, grpclimit.ErrInvalidSetup) || c.also != nil && !errors.Is(err, c.also) {
			t.Errorf("%s: Validate = %v", c.name, err)
		}
	}
}
