package policy

import (
	"errors"
	"fmt"

	"github.com/ratelimit-go/ratelimit"
)

// RuleSource is where a policy's rule comes from when it may change while
// the program runs, such as a rules file that is reloaded: For returns the
// rule named name for key (with key's own limit when it has one), and
// false when the source has no rule of that name. A *rules.Watcher and a
// *rules.Set of module github.com/ratelimit-go/ratelimit/rules satisfy it.
// It must be safe for concurrent use, and answer for any key, the empty
// key included (the adapters' startup checks ask for it).
//
// The adapters ask the source once per request and policy, after keying
// the request, so a rule changed in the source applies from the next
// request. State is kept per (rule name, key) whatever the limit: a
// changed limit applies at once to a key's existing log.
type RuleSource interface {
	For(name, key string) (ratelimit.Rule, bool)
}

// ErrUnknownRule is wrapped by the error of a policy whose RuleSource has
// no rule of the name it asks for.
var ErrUnknownRule = errors.New("policy: no such rule in the source")

// Lookup returns the rule named name for key from src, or an error
// wrapping ErrUnknownRule when src has no such rule.
func Lookup(src RuleSource, name, key string) (ratelimit.Rule, error) {
	r, ok := src.For(name, key)
	if !ok {
		return r, fmt.Errorf("%w: %q", ErrUnknownRule, name)
	}
	return r, nil
}

// RuleOf checks how an adapter's policy names its rule, when the adapter
// is set up, and returns the rule: rule itself when src is nil (name must
// then be empty), or the rule src has now for name and the empty key (rule
// must then be zero, name non-empty). The adapters' startup checks
// (httplimit.Validate, grpclimit.Validate) go through it.
func RuleOf(rule ratelimit.Rule, src RuleSource, name string) (ratelimit.Rule, error) {
	switch {
	case src == nil && name != "":
		return rule, fmt.Errorf("RuleName %q without Rules", name)
	case src == nil:
		return rule, nil
	case rule != ratelimit.Rule{}:
		return rule, fmt.Errorf("both a Rule (%q) and Rules", rule.Name)
	case name == "":
		return rule, errors.New("Rules without a RuleName")
	}
	return Lookup(src, name, "")
}
