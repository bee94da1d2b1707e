package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/ladder"
)

// DefaultPenaltyMemory is how long violations are remembered after the last
// one when Penalty.Memory is 0.
const DefaultPenaltyMemory = time.Hour

// Penalty escalates repeat offenders. Every rejection of a key is a
// violation. From WarnAfter violations on, rejections carry Result.Warned;
// at BanAfter violations the key is banned for BanFor: every call is
// rejected at once, without touching its window or its violations.
// Violations are forgotten Memory after the last one. A ban does not clear
// them, so a key that violates again within Memory after its ban ends is
// banned again at once.
//
// For example, with PerMinute(5) and Penalty{WarnAfter: 3, BanAfter: 5,
// BanFor: 30 * time.Minute}: calls 1–5 are allowed; 6 and 7 are rejected
// (violations 1, 2); 8 and 9 are rejected with a warning (3, 4); call 10 is
// banned for 30 minutes, and later calls are rejected as banned with the
// ban's remaining time.
type Penalty struct {
	// WarnAfter is the number of violations from which rejected results
	// carry Warned (0: no warning stage; otherwise below BanAfter).
	WarnAfter int
	// BanAfter is the number of violations at which the key is banned (>= 1).
	BanAfter int
	// BanFor is the length of a ban (> 0).
	BanFor time.Duration
	// Memory is how long violations are remembered after the last one
	// (0: DefaultPenaltyMemory).
	Memory time.Duration
	// BanGrowth makes repeat bans escalate, as fail2ban's increasing bans
	// do: each new ban of a key while its violations are remembered lasts
	// BanGrowth times the last one, up to MaxBanFor (0 or 1: every ban lasts
	// BanFor). The bans are forgotten along with the violations.
	BanGrowth float64
	// MaxBanFor caps escalating bans (>= BanFor; 0: DefaultMaxBanFor or
	// BanFor, whichever is longer).
	MaxBanFor time.Duration
}

// DefaultMaxBanFor is the longest escalating ban when Penalty.MaxBanFor is 0.
const DefaultMaxBanFor = 24 * time.Hour

// compile validates p into its plan in µs.
func (p *Penalty) compile() (ladder.Plan, error) {
	switch {
	case p.BanAfter < 1:
		return ladder.Plan{}, fmt.Errorf("penalty BanAfter %d is below 1", p.BanAfter)
	case p.BanFor <= 0:
		return ladder.Plan{}, fmt.Errorf("penalty BanFor %v is not positive", p.BanFor)
	case p.WarnAfter < 0:
		return ladder.Plan{}, fmt.Errorf("penalty WarnAfter %d is negative", p.WarnAfter)
	case p.WarnAfter >= p.BanAfter:
		return ladder.Plan{}, fmt.Errorf("penalty WarnAfter %d is not below BanAfter %d", p.WarnAfter, p.BanAfter)
	case p.Memory < 0:
		return ladder.Plan{}, fmt.Errorf("penalty Memory %v is negative", p.Memory)
	case p.BanFor.Microseconds() > maxMicros || p.Memory.Microseconds() > maxMicros:
		return ladder.Plan{}, errors.New("penalty BanFor or Memory is too long")
	case p.BanFor < time.Microsecond:
		return ladder.Plan{}, fmt.Errorf("penalty BanFor %v is shorter than 1µs", p.BanFor)
	case math.IsNaN(p.BanGrowth) || math.IsInf(p.BanGrowth, 0) || p.BanGrowth < 0 || p.BanGrowth > 0 && p.BanGrowth < 1:
		return ladder.Plan{}, fmt.Errorf("penalty BanGrowth %v is neither 0 nor a finite factor >= 1", p.BanGrowth)
	case p.MaxBanFor < 0 || p.MaxBanFor > 0 && p.MaxBanFor < p.BanFor || p.MaxBanFor.Microseconds() > maxMicros:
		return ladder.Plan{}, fmt.Errorf("penalty MaxBanFor %v is not between BanFor %v and the longest duration", p.MaxBanFor, p.BanFor)
	}
	memory := p.Memory
	if memory == 0 {
		memory = DefaultPenaltyMemory
	}
	if memory < time.Microsecond {
		memory = time.Microsecond
	}
	growth, maxBan := p.BanGrowth, p.MaxBanFor
	if growth == 0 {
		growth = 1
	}
	if maxBan == 0 {
		maxBan = max(DefaultMaxBanFor, p.BanFor)
	}
	return ladder.Plan{
		WarnAfter: int64(p.WarnAfter),
		BanAfter:  int64(p.BanAfter),
		BanFor:    p.BanFor.Microseconds(),
		Memory:    memory.Microseconds(),
		Growth:    growth,
		MaxBan:    maxBan.Microseconds(),
	}, nil
}
