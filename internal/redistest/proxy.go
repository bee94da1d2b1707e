package redistest

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 that forwards every connection to one
// target and can be told to misbehave: add latency, swallow traffic, reset
// connections or refuse new ones. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled by Close; ends dials and latency waits
	cancel context.CancelFunc

	latency     atomic.Int64 // time.Duration
	blackHole   atomic.Bool
	dropReplies atomic.Bool
	refuse      atomic.Bool
	accepted    atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // both sides of every open connection
	closed bool
	wg     sync.WaitGroup
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every
// connection to target. The proxy is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address clients should dial, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays each chunk of data forwarded, in either direction, by
// d before it is written. Chunks of one direction are delayed one after the
// other, so latency adds up under a stream. Zero turns it off.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// BlackHole, when on, makes the proxy keep accepting and reading but forward
// nothing in either direction: the traffic vanishes and connections stay
// open, as with a network that drops packets. Data read meanwhile is lost
// for good, so a connection used across the switch sees a broken stream.
func (p *Proxy) BlackHole(on bool) { p.blackHole.Store(on) }

// DropReplies, when on, makes the proxy forward what clients send and drop
// what the target answers: every command runs, and its reply is lost, as
// when a connection breaks after the request arrived. The replies dropped
// are lost for good, so a connection used across the switch sees a broken
// stream (ResetAll ends it).
func (p *Proxy) DropReplies(on bool) { p.dropReplies.Store(on) }

// Refuse, when on, makes the proxy close every new connection at once with
// a reset. Connections already open are left alone.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// ResetAll closes every open connection abruptly, both the client's and the
// target's side, with SO_LINGER 0 so that the peers get a reset rather than
// an orderly end of stream.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		reset(c)
	}
}

// Conns returns how many connections the proxy has accepted so far,
// including those closed at once because of Refuse.
func (p *Proxy) Conns() int { return int(p.accepted.Load()) }

// Close stops listening, closes every connection and waits until all the
// proxy's goroutines have ended. It is called when the test ends; calling
// it again does nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// acceptLoop accepts connections until the listener is closed.
func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.ctx.Err() != nil {
				return
			}
			// Out of descriptors, for instance: wait a little, try again.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.accepted.Add(1)
		if p.refuse.Load() {
			reset(c)
			continue
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects client to the target and copies data both ways until
// either side ends, then closes both.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	var d net.Dialer
	dctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	upstream, err := d.DialContext(dctx, "tcp", p.target)
	cancel()
	if err != nil {
		reset(client)
		return
	}
	if !p.track(upstream) {
		upstream.Close()
		client.Close()
		return
	}
	defer p.untrack(upstream)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pipe(upstream, client, nil)
		client.Close()
		upstream.Close()
	}()
	p.pipe(client, upstream, &p.dropReplies)
	client.Close()
	upstream.Close()
	<-done
}

// pipe copies src to dst, applying latency and black hole (and dropping
// everything while drop is on, when not nil), until reading or writing
// fails or the proxy is closed.
func (p *Proxy) pipe(dst, src net.Conn, drop *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.latency.Load()); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-p.ctx.Done():
					t.Stop()
					return
				}
			}
			if !p.blackHole.Load() && (drop == nil || !drop.Load()) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// track records an open connection; it reports false once the proxy is
// closed, and the caller must then close the connection itself.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// untrack forgets a connection that has been closed.
func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// reset closes c so that its peer gets a TCP reset.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
