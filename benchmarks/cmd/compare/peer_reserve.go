package main

import (
	"context"
	"fmt"
)

// reserveN is the events each call of case R asks for.
const reserveN = 4

// oursN is ours deciding reserveN events a call: AllowN, or a Reserve of
// them settled at settle (see Reservation.Settle): less gives the rest
// back (one more script), equal changes nothing, more charges the extra
// (one more script).
type oursN struct {
	*ours
	reserve bool
	settle  int
}

func (o *oursN) Allow(ctx context.Context, key string) (bool, error) {
	if !o.reserve {
		r, err := o.l.AllowN(ctx, o.rule, key, reserveN)
		if r.Degraded {
			o.degraded.Add(1)
		}
		return r.Allowed, err
	}
	res, r, err := o.l.Reserve(ctx, o.rule, key, reserveN)
	if r.Degraded {
		o.degraded.Add(1)
	}
	if res == nil || err != nil {
		return false, err
	}
	return true, res.Settle(ctx, o.settle)
}

// oursNContender is ours under case R: AllowN(reserveN), or with reserve
// a Reserve settled at settle, under the spec's rate times reserveN (an
// op at the reserved cost takes what an Allow takes under the spec).
func oursNContender(reserve bool, settle int) contender {
	name := fmt.Sprintf("ratelimit AllowN(%d)", reserveN)
	if reserve {
		name = fmt.Sprintf("ratelimit Reserve(%d)+Settle(%d)", reserveN, settle)
	}
	return contender{name: name, remote: true, open: func(addr string, s spec) (limiter, func(), error) {
		s.rate *= reserveN // an op of AllowN(reserveN) takes what a call of Allow takes under s
		l, stop, err := openOurs(addr, s)
		if err != nil {
			return nil, nil, err
		}
		return &oursN{ours: l.(*ours), reserve: reserve, settle: settle}, stop, nil
	}}
}

var (
	oursAllowN       = oursNContender(false, 0)
	oursSettleLess   = oursNContender(true, reserveN/2)
	oursSettleEqual  = oursNContender(true, reserveN)
	oursSettleMore   = oursNContender(true, reserveN+2)
	reserveContender = []contender{floorContender, oursAllowN, oursSettleEqual, oursSettleLess, oursSettleMore}
)
