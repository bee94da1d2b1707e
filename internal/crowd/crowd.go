// Package crowd queues the calls of one busy key: at most a room's worth
// of them are on their way at once (flying, each with a seat), and the
// others wait, oldest first, for a seat or to be woken to look again.
//
// A Crowd is not safe for concurrent use: its owner guards it with a lock
// (the local store's shard lock), and every method but Seat.Ready,
// Seat.Granted and Waiting's is called with that lock held.
package crowd

// Crowd is the calls of one key on their way (flying) and those that wait
// for a seat. Its zero value has no room: make one with New.
type Crowd struct {
	flying int64   // calls with a seat, not landed yet
	room   int64   // seats: at most this many calls fly at once (>= 1)
	queue  []*Seat // calls waiting, oldest first
}

// New returns a crowd with one seat and nobody in it.
func New() Crowd { return Crowd{room: 1} }

// Flying returns how many calls with a seat have not landed yet.
func (c *Crowd) Flying() int64 { return c.flying }

// Full reports whether a call that comes now must wait: every seat is
// taken, or others wait already (they go first).
func (c *Crowd) Full() bool { return c.flying >= c.room || len(c.queue) > 0 }

// Idle reports whether no call flies and none waits.
func (c *Crowd) Idle() bool { return c.flying == 0 && len(c.queue) == 0 }

// Wait puts a call at the end of the queue and returns its seat to wait
// on.
func (c *Crowd) Wait() *Seat {
	w := &Seat{ready: make(chan struct{})}
	c.queue = append(c.queue, w)
	return w
}

// Sit counts a call that takes a seat without waiting for one.
func (c *Crowd) Sit() { c.flying++ }

// Stand takes back a seat, without giving it to a call that waits: the
// call landed (the caller then sets the room, see Rejected and Left), or
// it will wait again.
func (c *Crowd) Stand() { c.flying-- }

// GiveBack takes back a seat a call will not use and gives the free seats
// to the calls that wait.
func (c *Crowd) GiveBack() {
	c.flying--
	c.SeatWaiting()
}

// Rejected leaves one seat, and wakes every call that waits without one:
// a rejection landed, and each looks again (a cached rejection may answer
// it).
func (c *Crowd) Rejected() {
	c.room = 1
	c.WakeAll()
}

// Left leaves as many seats as remain (at least one) and gives the free
// ones to the calls that wait.
func (c *Crowd) Left(remaining int64) {
	c.room = max(1, remaining)
	c.SeatWaiting()
}

// SeatWaiting gives the free seats to the calls that wait, oldest first.
func (c *Crowd) SeatWaiting() {
	for len(c.queue) > 0 && c.flying < c.room {
		w := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		if w.gone {
			continue
		}
		w.granted = true
		c.flying++
		close(w.ready)
	}
}

// WakeAll wakes every call that waits, without a seat.
func (c *Crowd) WakeAll() {
	for i, w := range c.queue {
		if !w.gone {
			close(w.ready)
		}
		c.queue[i] = nil
	}
	c.queue = c.queue[:0]
}

// Woken returns a seat already woken, without a seat, in no crowd's
// queue: for a call that must look again at once.
func Woken() *Seat {
	w := &Seat{ready: make(chan struct{})}
	close(w.ready)
	return w
}

// Seat is a call waiting in a crowd. The crowd's owner's lock guards
// granted and gone; Ready is closed when the call is woken, with a seat
// or to look again, and granted is set before that.
type Seat struct {
	ready   chan struct{}
	granted bool
	gone    bool
}

// Ready returns the channel that is closed when the call is woken.
func (w *Seat) Ready() <-chan struct{} { return w.ready }

// Granted reports whether the call was woken with a seat. It may be read
// without the lock once Ready is closed.
func (w *Seat) Granted() bool { return w.granted }

// Leave takes a call that stopped waiting on w out of its crowd's queue,
// and reports whether it was given a seat meanwhile (it then flies with
// it, or gives it back). The caller holds the crowd's owner's lock; the
// crowd may be gone.
func (w *Seat) Leave() bool {
	if w.granted {
		return true
	}
	w.gone = true
	return false
}
