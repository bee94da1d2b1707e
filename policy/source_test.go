package policy_test

import (
	"errors"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/policy"
)

// fixed is a RuleSource of one rule.
type fixed ratelimit.Rule

func (f fixed) For(name, key string) (ratelimit.Rule, bool) { return ratelimit.Rule(f), name == f.Name }

func TestRuleOf(t *testing.T) {
	rule := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
	src := fixed(rule)
	for _, c := range []struct {
		name    string
		rule    ratelimit.Rule
		src     policy.RuleSource
		ruleFor string
		want    ratelimit.Rule
		bad     bool
		is      error
	}{
		{name: "a fixed rule", rule: rule, want: rule},
		{name: "a rule from the source", src: src, ruleFor: "coupon", want: rule},
		{name: "both", rule: rule, src: src, ruleFor: "coupon", bad: true},
		{name: "RuleName without Rules", rule: rule, ruleFor: "coupon", bad: true},
		{name: "Rules without RuleName", src: src, bad: true},
		{name: "a name the source lacks", src: src, ruleFor: "coupons", bad: true, is: policy.ErrUnknownRule},
	} {
		got, err := policy.RuleOf(c.rule, c.src, c.ruleFor)
		if (err != nil) != c.bad || c.is != nil && !errors.Is(err, c.is) || !c.bad && got != c.want {
			t.Errorf("%s: RuleOf = %+v, %v", c.name, got, err)
		}
	}
}
