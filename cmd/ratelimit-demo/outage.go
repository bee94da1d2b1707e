package main

import (
	"io"
	"net"
	"sync"

	"github.com/alicebob/miniredis/v2"
)

// outage is how the story takes Redis away from the limiter and gives it
// back, and how it tells the reader.
type outage struct {
	stop  func()
	start func() error
	// title of act 2, note printed when Redis goes, title of act 3.
	title2, down, title3 string
}

// stopMiniredis is the outage of the embedded miniredis: the demo stops
// and restarts the server itself.
func stopMiniredis(mr *miniredis.Miniredis) outage {
	return outage{
		stop:   mr.Close,
		start:  mr.Restart,
		title2: "2. Redis goes down in the middle of bob's claims",
		down:   "-- Redis stops --",
		title3: "3. Redis comes back",
	}
}

// cutProxy is the outage of a Redis the demo must not stop (yours): the
// limiter talks to it through p, and the demo cuts p instead. For the
// limiter that is Redis going away (its connections drop, new ones are
// refused); the server keeps running and serving its other clients.
func cutProxy(p *proxy) outage {
	return outage{
		stop:   p.cut,
		start:  p.mend,
		title2: "2. Redis becomes unreachable in the middle of bob's claims",
		down:   "-- the demo cuts its connection to Redis (the server keeps running) --",
		title3: "3. Redis is reachable again",
	}
}

// proxy forwards TCP connections from a loopback address of its own to a
// Redis server, until it is cut: then it closes every connection and
// refuses new ones until it is mended, on the same address.
type proxy struct {
	target string // the Redis server
	addr   string // where the limiter connects

	mu    sync.Mutex // guards ln and conns
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // the accept loops and the pipes
}

// newProxy returns a proxy to target, listening on a free loopback port.
// It fails when target cannot be reached, with the error of that dial.
func newProxy(target string) (*proxy, error) {
	c, err := net.DialTimeout("tcp", target, storyTimeout)
	if err != nil {
		return nil, err
	}
	c.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p, nil
}

// serve accepts connections on ln until ln is closed.
func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.pipe(down)
			}()
		}
	}()
}

// pipe connects down (the limiter's connection) to the target, both ways,
// until either side closes or the proxy is cut.
func (p *proxy) pipe(down net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, storyTimeout)
	if err != nil {
		down.Close()
		return
	}
	if !p.track(down, up) {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(up, down)
		up.Close()
		close(done)
	}()
	io.Copy(down, up)
	down.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, down)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track registers a pipe's two connections, or closes them and reports
// false when the proxy was cut meanwhile.
func (p *proxy) track(down, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		down.Close()
		up.Close()
		return false
	}
	p.conns[down], p.conns[up] = struct{}{}, struct{}{}
	return true
}

// cut closes the listener and every connection: the limiter's calls fail
// and its reconnections are refused.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// mend listens again on the proxy's address.
func (p *proxy) mend() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Close cuts the proxy for good and waits for its goroutines.
func (p *proxy) Close() {
	p.cut()
	p.wg.Wait()
}
