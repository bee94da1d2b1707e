package breaker

// A decision made without Redis because a breaker is not closed is owed
// to Redis, and the other instances must count it from the moment it may
// be made (see the Limiter's heartbeat, which says whether it owes). A
// caller that saw the breaker open may, though, record its decision only
// after the breaker closed and a heartbeat said that nothing is owed: a
// goroutine descheduled between the two, or one the half-open breaker
// refused just before its probe closed it. So such a decision is made
// under a hold: Hold counts it before it looks at the state again, and
// Owes looks at the state before the count. Whichever order the two come
// in, Owes sees the state not closed, the hold, or (once the hold is
// released) what the decision recorded, which its caller reads after it.

// Hold begins a decision without Redis: it reports whether the breaker is
// still not closed, and then holds it until Release; when it is closed,
// it holds nothing, and the caller sends the call to Redis instead.
func (b *Breaker) Hold() bool {
	b.deciding.Add(1)
	if State(b.state.Load()) != Closed {
		return true
	}
	b.deciding.Add(-1)
	return false
}

// Release ends a decision Hold began.
func (b *Breaker) Release() { b.deciding.Add(-1) }

// Owes reports whether a decision without Redis may be under way behind
// the breaker: it is not closed, or a decision Hold began has not been
// released. What a released decision recorded is its caller's to read,
// after Owes.
func (b *Breaker) Owes() bool {
	return State(b.state.Load()) != Closed || b.deciding.Load() > 0
}
