package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/script"
)

// Ban bans key under rule for d, by hand: through the same penalty state
// the ladder keeps, so every path honours it (Redis, the hot-key shield and
// the local fallback). Its violations stay as they are. Reset lifts it.
// The rule needs a Penalty, and d must be at least 1µs (ErrInvalidBan).
//
// When Redis cannot be used, Ban still bans the key in the local limiter,
// and returns an error wrapping ErrUnavailable: Redis does not know of it
// until the write-back brings it there (see Options.WriteBackMax).
func (l *Limiter) Ban(ctx context.Context, rule Rule, key string, d time.Duration) error {
	ban := d.Microseconds()
	return l.byHand(ctx, &rule, key, handChange{
		what: fmt.Sprintf("ban of key %q: banned locally only", key),
		check: func(p *plan) error {
			switch {
			case !p.penalize:
				return fmt.Errorf("%w: rule %q has no Penalty", ErrInvalidBan, rule.Name)
			case d < time.Microsecond || ban > maxMicros:
				return fmt.Errorf("%w: a ban of %v", ErrInvalidBan, d)
			}
			return nil
		},
		local: func(k lkey, _ *plan, now int64) { l.local.ban(k, now, ban) },
		redis: func(keys *pairKeys, _ *plan, now int64) (*script.Script, []string, []string) {
			return banScript, []string{keys.Penalty}, []string{l.clockArg(now, false), itoa(ban)}
		},
		owe: func(k lkey, p *plan, now int64) { l.local.oweBan(k, p, now+ban) },
	})
}
