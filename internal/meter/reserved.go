package meter

// reserved holds a bucket's outstanding reservations, so that a settle
// gives back exactly what the reservation would not have taken.
//
// # Why it is exact
//
// The TAT after events (t_k, m_k) in arrival order, TAT_k = max(TAT_{k-1},
// t_k) + m_k·T, unrolls to
//
//	TAT = max over events e of (t_e + T·Σ_{f >= e} m_f)
//
// (each event's time plus the tokens from it on; any t, in any order). A
// reservation given back in part is the event it would have been had its
// Reserve asked for less; moving the TAT back by the difference is wrong
// when a call came after it at a bucket that had drained meanwhile (the
// max clamped): reserve 10 at 0, a call at 5T, a cancel at 5T must leave
// Burst - 1 tokens, the TAT 6T, not T.
//
// So the events are kept in two parts: the main sequence (plain calls,
// written-back events, settles' extras, settled reservations at their
// actual cost), whose TAT is main and whose tokens since the first
// reservation cost c (C·T, a time, so that it stays exact in Lua however
// long the bucket never fills); and the outstanding reservations, each
// with its arrival position in it: x = max(main's TAT before it, its time)
// and c, main's C·T before it. Inserting an event (t0, a) at a position of
// a sequence gives TAT = max(TAT without it, X + a·T + (tokens after it)·T)
// with X = max(TAT before the position, t0): the terms of the events
// before it grow by a·T, the others do not change. Hence:
//
//   - a plain call of m at t moves main to max(main, t) + m·T and c by
//     m·T (add), and the bucket's TAT as always;
//   - a reservation of n at t (AddAs) keeps (x, c, n) and moves the TAT
//     as AllowN's would: the TAT counts every event, outstanding ones at
//     their n, so Reserve decides as AllowN, and a reservation never
//     settled stands and drains as one;
//   - settling i at a <= n_i (Settle) inserts it into main: main =
//     max(main, x_i + a·T + (c - c_i)); each later outstanding j has
//     x_j = max(x_j, x_i + a·T + (c_j - c_i)) and c_j += a·T; c += a·T;
//     then the TAT is recomputed over the outstanding ones left, in
//     order, each inserted after the one before: x'_1 = x_1, x'_j =
//     max(x_j, x'_{j-1} + n_{j-1}·T + (c_j - c_{j-1})), TAT = max(main,
//     x'_last + n_last·T + (c - c_last)), which is main's with none left;
//   - when a call finds TAT <= now (the bucket is full), every term is
//     at most now, and so at most the term of any event from now on:
//     nothing a give-back lowers can matter again, and the reservations
//     are forgotten (a settle that finds no record gives nothing back).
//
// Each step is the model's TAT over the events it names, integers exact
// in µs and ticks; a settle costs O(outstanding), a plain call O(1).
// lua/gcra.lua keeps the same numbers in the bucket's own string.
type reserved struct {
	main instant // the TAT of the events but the outstanding reservations
	c    instant // C·T: what main's events since the first reservation cost
	out  []outstanding
}

// outstanding is one reservation not settled yet.
type outstanding struct {
	id uint64  // the reservation's (or AllowAll pair's) call number (the root's undo.rec)
	x  instant // max(main's TAT when it came, its time)
	c  instant // C·T when it came
	n  int64
}

// add puts a plain event of k ticks at at into the main sequence.
func (rs *reserved) add(at instant, k, rq int64) {
	rs.main = later(rs.main, at).plus(k, rq)
	rs.c = rs.c.plus(k, rq)
}

// Settle gives back d of the tokens the outstanding reservation id took
// (d = 0 settles it at its cost: it joins the main sequence), and moves
// the TAT where the events would have left it had the reservation asked for
// that much less (see reserved). It reports whether the bucket held the
// reservation: one it does not hold (given back before, forgotten by a full
// bucket) gives nothing back.
func (b *Bucket) Settle(id uint64, d int64) bool {
	rs := b.res
	if rs == nil {
		return false
	}
	i := -1
	for j := range rs.out {
		if rs.out[j].id == id {
			i = j
			break
		}
	}
	if i < 0 {
		return false
	}
	o := rs.out[i]
	cost := (o.n - min(max(d, 0), o.n)) * b.wq
	rs.main = later(rs.main, o.x.shift(rs.c, o.c, cost, b.rq))
	for j := i + 1; j < len(rs.out); j++ {
		q := &rs.out[j]
		q.x = later(q.x, o.x.shift(q.c, o.c, cost, b.rq))
		q.c = q.c.plus(cost, b.rq)
	}
	rs.c = rs.c.plus(cost, b.rq)
	rs.out = append(rs.out[:i], rs.out[i+1:]...)
	t := rs.main
	if len(rs.out) == 0 {
		b.res = nil
	} else {
		t = later(t, rs.chain(b.wq, b.rq))
	}
	// A give-back never raises the TAT: it is lower than what a mirror
	// learnt from Redis' replies (CopyFrom), which counted others' calls.
	if t.before(b.tat()) {
		b.w, b.r = t.w, t.r
	}
	return true
}

// chain returns the term of the outstanding reservations: each inserted
// after the one before it, the last one's end moved on by main's tokens
// after it.
func (rs *reserved) chain(wq, rq int64) instant {
	p := &rs.out[0]
	x := p.x
	for j := 1; j < len(rs.out); j++ {
		q := &rs.out[j]
		x = later(q.x, x.shift(q.c, p.c, p.n*wq, rq))
		p = q
	}
	return x.shift(rs.c, p.c, p.n*wq, rq)
}

// cut fits the remainders kept for another rq (a changed rule, the
// degraded share) to rq, as lua/gcra.lua does.
func (rs *reserved) cut(rq int64) {
	rs.main.r, rs.c.r = min(rs.main.r, rq-1), min(rs.c.r, rq-1)
	for j := range rs.out {
		o := &rs.out[j]
		o.x.r, o.c.r = min(o.x.r, rq-1), min(o.c.r, rq-1)
	}
}
