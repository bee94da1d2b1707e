package ratelimit

import (
	"context"
	"errors"

	"github.com/ratelimit-go/ratelimit/internal/script"
	"github.com/redis/rueidis"
)

// handChange is a change made by hand to one pair's state (Reset, Ban):
// made in the local store at once, then in Redis by a script, and owed to
// Redis (see writeback.go) when Redis cannot be used.
type handChange struct {
	what  string                                                                        // what is not done when Redis cannot be used
	check func(p *plan) error                                                           // the change's own checks of the rule; may be nil
	local func(k lkey, p *plan, now int64)                                              // the change in the local store
	redis func(keys *pairKeys, p *plan, now int64) (*script.Script, []string, []string) // the script, its keys (the first routes the call) and arguments
	owe   func(k lkey, p *plan, now int64)                                              // remembers the change for the write-back
}

// byHand makes change to key's state under rule: locally, then on Redis.
// When Redis cannot be used it returns an error wrapping ErrUnavailable,
// and the write-back brings the change to Redis later.
func (l *Limiter) byHand(ctx context.Context, rule *Rule, key string, change handChange) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	p, err := rule.compile()
	if err != nil {
		return err
	}
	if change.check != nil {
		if err := change.check(&p); err != nil {
			return err
		}
	}
	k, err := localKey(rule.Name, key)
	if err != nil {
		return err
	}
	now := l.localNow()
	change.local(k, &p, now)
	if !l.remote {
		return nil
	}
	keys := redisKeys(l.set.KeyPrefix, k)
	s, ks, args := change.redis(&keys, &p, now)
	err = l.sendWithoutFallback(ctx, l.conn.Load(), ks[0], subject{"rule", rule.Name}, change.what, false,
		func(ctx context.Context, c rueidis.Client) error {
			return s.Exec(ctx, c, ks, args).Error()
		})
	if errors.Is(err, ErrUnavailable) {
		change.owe(k, &p, now)
	}
	return err
}
