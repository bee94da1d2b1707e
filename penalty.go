package ratelimit

import (
	"errors"
	"fmt"
	"time"
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
}

// penaltyPlan is a validated Penalty in microseconds.
type penaltyPlan struct {
	warnAfter int64
	banAfter  int64
	banFor    int64 // µs
	memory    int64 // µs
}

func (p *Penalty) compile() (penaltyPlan, error) {
	switch {
	case p.BanAfter < 1:
		return penaltyPlan{}, fmt.Errorf("penalty BanAfter %d is below 1", p.BanAfter)
	case p.BanFor <= 0:
		return penaltyPlan{}, fmt.Errorf("penalty BanFor %v is not positive", p.BanFor)
	case p.WarnAfter < 0:
		return penaltyPlan{}, fmt.Errorf("penalty WarnAfter %d is negative", p.WarnAfter)
	case p.WarnAfter >= p.BanAfter:
		return penaltyPlan{}, fmt.Errorf("penalty WarnAfter %d is not below BanAfter %d", p.WarnAfter, p.BanAfter)
	case p.Memory < 0:
		return penaltyPlan{}, fmt.Errorf("penalty Memory %v is negative", p.Memory)
	case p.BanFor.Microseconds() > maxMicros || p.Memory.Microseconds() > maxMicros:
		return penaltyPlan{}, errors.New("penalty BanFor or Memory is too long")
	case p.BanFor < time.Microsecond:
		return penaltyPlan{}, fmt.Errorf("penalty BanFor %v is shorter than 1µs", p.BanFor)
	}
	memory := p.Memory
	if memory == 0 {
		memory = DefaultPenaltyMemory
	}
	if memory < time.Microsecond {
		memory = time.Microsecond
	}
	return penaltyPlan{
		warnAfter: int64(p.WarnAfter),
		banAfter:  int64(p.BanAfter),
		banFor:    p.BanFor.Microseconds(),
		memory:    memory.Microseconds(),
	}, nil
}

// strikes is the penalty state of one key, as the local path keeps it; the
// remote path keeps the same three numbers in a Redis hash.
type strikes struct {
	violations int64 // as of last
	last       int64 // µs of the last violation
	banEnd     int64 // µs; banned while now < banEnd
}

// remembered returns the violations still remembered at now.
func (p *penaltyPlan) remembered(s *strikes, now int64) int64 {
	if s == nil || s.violations == 0 || now-s.last >= p.memory {
		return 0
	}
	return s.violations
}

// violate records one violation at now and returns whether it bans the key
// and whether it warns.
func (p *penaltyPlan) violate(s *strikes, now int64) (banned, warned bool) {
	s.violations = p.remembered(s, now) + 1
	s.last = now
	if s.violations >= p.banAfter {
		s.banEnd = now + p.banFor
		return true, false
	}
	return false, p.warnAfter > 0 && s.violations >= p.warnAfter
}
