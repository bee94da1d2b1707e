package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

func TestBanRejectsWhatItCannotDo(t *testing.T) {
	l := testkit.NewLimiter(t, nil, ratelimit.Options{})
	ctx := context.Background()
	plain := ratelimit.Rule{Name: "plain", Limit: ratelimit.PerMinute(1)}
	penalized := ratelimit.Rule{Name: "p", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: time.Minute}}
	for name, err := range map[string]error{
		"a rule without a Penalty": l.Ban(ctx, plain, "k", time.Minute),
		"a ban of 0":               l.Ban(ctx, penalized, "k", 0),
		"a negative ban":           l.Ban(ctx, penalized, "k", -time.Second),
	} {
		if !errors.Is(err, ratelimit.ErrInvalidBan) {
			t.Errorf("%s: %v, want ErrInvalidBan", name, err)
		}
	}
	if err := l.Ban(ctx, ratelimit.Rule{}, "k", time.Minute); !errors.Is(err, ratelimit.ErrInvalidRule) {
		t.Errorf("an invalid rule: %v", err)
	}
	if err := l.Ban(ctx, penalized, "", time.Minute); !errors.Is(err, ratelimit.ErrInvalidKey) {
		t.Errorf("an empty key: %v", err)
	}
	l.Close()
	if err := l.Ban(ctx, penalized, "k", time.Minute); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestBanDuringOutage: a ban made while Redis is down holds locally, and
// the caller learns that Redis does not know of it.
func TestBanDuringOutage(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs testkit.SyncBuffer
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.OutageOptions(testkit.NewClock(), &logs, nil))
	rule := ratelimit.Rule{Name: "ban-outage", Limit: ratelimit.PerMinute(5), Penalty: &ratelimit.Penalty{BanAfter: 3, BanFor: time.Hour}}
	testkit.Allow(t, l, rule, "k")
	mr.Close()
	if err := l.Ban(context.Background(), rule, "k", time.Hour); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("Ban during an outage: %v, want ErrUnavailable", err)
	}
	if r := testkit.Allow(t, l, rule, "k"); !r.Banned || !r.Degraded || r.BannedFor != time.Hour {
		t.Fatalf("after a local ban = %+v", r)
	}
}
