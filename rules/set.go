package rules

import (
	"slices"

	"github.com/ratelimit-go/ratelimit"
)

// Set is the rules of one file, by name, each with its per-key overrides.
// A Set never changes once Parse or Load returned it: it is safe for
// concurrent use, and a reload makes a new one.
type Set struct {
	rules map[string]*entry
	names []string // sorted
}

// entry is one rule of a Set.
type entry struct {
	rule      ratelimit.Rule
	kind      string                    // its kind, as the file names it
	overrides map[string]ratelimit.Rule // by key
	keys      []string                  // the overrides' keys, sorted
	line      int                       // where the rule starts in its file
}

// Rule returns the rule named name as the file writes it, without any
// override, and true; or false when the Set has no such rule.
func (s *Set) Rule(name string) (ratelimit.Rule, bool) {
	if s == nil {
		return ratelimit.Rule{}, false
	}
	e, ok := s.rules[name]
	if !ok {
		return ratelimit.Rule{}, false
	}
	return e.rule, true
}

// For returns the rule named name for key, and true: the rule with key's
// override applied when it has one, the rule as written otherwise. An
// override keeps the rule's name, so that a key's state is the same
// (name, key) pair under either limit: a changed limit applies at once to
// the key's existing log. For returns false when the Set has no rule
// named name.
func (s *Set) For(name, key string) (ratelimit.Rule, bool) {
	if s == nil {
		return ratelimit.Rule{}, false
	}
	e, ok := s.rules[name]
	if !ok {
		return ratelimit.Rule{}, false
	}
	if r, ok := e.overrides[key]; ok {
		return r, true
	}
	return e.rule, true
}

// Names returns the names of the Set's rules, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.names)
}

// missing returns the first of names the Set has no rule for, or "".
func (s *Set) missing(names []string) (string, bool) {
	for _, name := range names {
		if _, ok := s.rules[name]; !ok {
			return name, true
		}
	}
	return "", false
}
