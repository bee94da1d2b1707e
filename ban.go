package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
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
	if err := l.usable(ctx); err != nil {
		return err
	}
	p, err := rule.compile()
	if err != nil {
		return err
	}
	switch {
	case !p.penalize:
		return fmt.Errorf("%w: rule %q has no Penalty", ErrInvalidBan, rule.Name)
	case d < time.Microsecond || d.Microseconds() > maxMicros:
		return fmt.Errorf("%w: a ban of %v", ErrInvalidBan, d)
	}
	k, err := localKey(rule.Name, key)
	if err != nil {
		return err
	}
	now := l.localNow()
	l.local.ban(k, now, d.Microseconds())
	if !l.remote {
		return nil
	}
	keys := redisKeys(l.set.KeyPrefix, k)
	var at string
	if l.set.Clock != nil {
		at = strconv.FormatInt(now, 10)
	}
	args := []string{at, strconv.FormatInt(d.Microseconds(), 10)}
	err = l.sendWithoutFallback(ctx, l.conn.Load(), keys[1], subject{"rule", rule.Name}, fmt.Sprintf("ban of key %q: banned locally only", key), false,
		func(ctx context.Context, c rueidis.Client) error {
			return banScript.exec(ctx, c, keys[1:2], args).Error()
		})
	if errors.Is(err, ErrUnavailable) {
		l.local.oweBan(k, &p, now+d.Microseconds())
	}
	return err
}
