package ratelimit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

func TestAllowGroupRejectsBadInput(t *testing.T) {
	l := testkit.NewLimiter(t, nil, ratelimit.Options{})
	ctx := context.Background()
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(2)}
	approx := ratelimit.Rule{Name: "a", Limit: ratelimit.PerMinute(2), Approximate: true}
	many := make([]ratelimit.Check, ratelimit.MaxGroupSize+1)
	for i := range many {
		many[i] = ratelimit.Check{Rule: rule, Key: "k"}
	}
	for name, c := range map[string]struct {
		group  string
		checks []ratelimit.Check
		want   error
	}{
		"empty group":      {"", []ratelimit.Check{{Rule: rule, Key: "k"}}, ratelimit.ErrInvalidKey},
		"no pairs":         {"g", nil, ratelimit.ErrInvalidRule},
		"too many pairs":   {"g", many, ratelimit.ErrInvalidRule},
		"approximate":      {"g", []ratelimit.Check{{Rule: approx, Key: "k"}}, ratelimit.ErrInvalidRule},
		"invalid rule":     {"g", []ratelimit.Check{{Rule: ratelimit.Rule{Name: "x"}, Key: "k"}}, ratelimit.ErrInvalidRule},
		"empty key":        {"g", []ratelimit.Check{{Rule: rule}}, ratelimit.ErrInvalidKey},
		"n above the rate": {"g", []ratelimit.Check{{Rule: rule, Key: "k", N: 3}}, ratelimit.ErrInvalidN},
		"negative n":       {"g", []ratelimit.Check{{Rule: rule, Key: "k", N: -1}}, ratelimit.ErrInvalidN},
	} {
		if _, err := l.AllowGroup(ctx, c.group, c.checks); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
