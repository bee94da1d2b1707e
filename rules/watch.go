package rules

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// DefaultInterval is how often a Watcher checks its file when
// WatchOptions.Interval is 0.
const DefaultInterval = time.Second

// WatchOptions configure Watch. The zero value is a sensible
// configuration: each field documents its default.
type WatchOptions struct {
	// OnChange, when set, is called with the new rules after each reload
	// that is applied; not after the first load, which Watch returns. It
	// runs on the Watcher's goroutine, after Current returns the new rules,
	// and under no lock of the Watcher's: it may call Current and Status,
	// but not Close (Close waits for that goroutine).
	OnChange func(*Set)
	// OnError, when set, is called when the file in place cannot be
	// applied: it cannot be read (a deleted file's error wraps
	// fs.ErrNotExist), it is invalid ([ErrInvalid]), or it lacks a rule
	// Require names ([ErrMissingRule]). Current is unchanged. It is called
	// once per failure, not at every check: again when the file changes
	// and is still wrong. It runs as OnChange does.
	OnError func(error)
	// Interval is how often the file is checked. The default is
	// DefaultInterval (1 s); it must not be negative.
	Interval time.Duration
	// Require names rules that every version of the file must have: the
	// rules the program's policies name. Watch fails when the first load
	// lacks one, and a reload that lacks one is refused as a whole.
	Require []string
}

// Watcher holds the rules of a file and reloads them when the file
// changes. Its methods are safe for concurrent use.
//
// Every Interval it reads the file at the path it was given, resolving
// that path again (symbolic links included), and compares the contents
// with the rules' by their SHA-256 digest; so it sees a file rewritten in
// place, a file replaced by a rename, and a Kubernetes ConfigMap's
// symbolic links swapped to a new directory, whatever their modification
// times say. New contents are read twice, a tenth of Interval apart (at
// most 100 ms), and applied only when both reads agree, so that a write
// in progress is not applied half done; write the file with a rename (as
// editors and Kubernetes do) to be sure of that. Contents that fail to
// load are never applied in part: Current keeps the last good rules, and
// OnError is called. A file that disappears is such a failure, never an
// empty set of rules.
type Watcher struct {
	path   string
	opts   WatchOptions
	settle time.Duration // between the two reads of new contents

	cur atomic.Pointer[Set]

	checking sync.Mutex // one check at a time; guards applied and failed
	applied  [sha256.Size]byte
	failed   string // what the last reported failure was about ("" when none)

	mu     sync.Mutex // guards status
	status Status

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Status says where a Watcher's rules came from and how its last checks
// went.
type Status struct {
	// Path is the file watched, as Watch was given it.
	Path string
	// Loaded is when the rules in force were loaded: by Watch, or by the
	// last reload applied.
	Loaded time.Time
	// Reloads counts the reloads applied since Watch.
	Reloads int
	// Err is why the file in place is not in force (the error OnError
	// was given), and ErrAt when that was found; Err is nil while the
	// file in place is the rules in force.
	Err   error
	ErrAt time.Time
}

// Watch loads the rules file at path, as Load does, and watches it for
// changes until Close (see Watcher). It fails if the first load fails, or
// lacks a rule opts.Require names. A negative opts.Interval is ErrInvalid.
func Watch(path string, opts WatchOptions) (*Watcher, error) {
	if opts.Interval < 0 {
		return nil, fmt.Errorf("%w: WatchOptions.Interval %v is negative", ErrInvalid, opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	set, err := load(path, data, opts.Require)
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		path:   path,
		opts:   opts,
		settle: min(opts.Interval/10, 100*time.Millisecond),
		status: Status{Path: path, Loaded: time.Now()},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	w.applied = sha256.Sum256(data)
	w.cur.Store(set)
	go w.run()
	return w, nil
}

// load parses a file's contents and checks that it has the rules require
// names.
func load(path string, data []byte, require []string) (*Set, error) {
	set, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	if name, ok := set.missing(require); ok {
		return nil, fmt.Errorf("%s: %w: no rule %q, which the program uses", path, ErrMissingRule, name)
	}
	return set, nil
}

// Current returns the rules in force: the last version of the file that
// loaded. It is never nil.
func (w *Watcher) Current() *Set { return w.cur.Load() }

// For returns Current().For(name, key): the rule named name, with key's
// override applied when it has one, from the rules in force.
func (w *Watcher) For(name, key string) (ratelimit.Rule, bool) { return w.cur.Load().For(name, key) }

// Status returns where the rules in force came from and how the last
// checks went.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Close stops watching and waits for the Watcher's goroutine to end; the
// rules in force stay readable. It returns nil, and may be called more
// than once. Do not call it from OnChange or OnError.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() { close(w.stop) })
	<-w.done
	return nil
}

func (w *Watcher) run() {
	defer close(w.done)
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.check()
		}
	}
}

// check reads the file once and applies it if it changed and loads; it
// then calls the hook its outcome calls for, outside every lock.
func (w *Watcher) check() {
	set, err := w.reload()
	switch {
	case set != nil && w.opts.OnChange != nil:
		w.opts.OnChange(set)
	case err != nil && w.opts.OnError != nil:
		w.opts.OnError(err)
	}
}

// reload returns the new rules it applied, or the failure to report, or
// neither when there is nothing new.
func (w *Watcher) reload() (*Set, error) {
	w.checking.Lock()
	defer w.checking.Unlock()
	data, err := os.ReadFile(w.path)
	if err != nil {
		return nil, w.fail("read: "+err.Error(), fmt.Errorf("rules: %w", err))
	}
	sum := sha256.Sum256(data)
	if sum == w.applied {
		w.failed = ""
		w.setStatus(func(s *Status) { s.Err, s.ErrAt = nil, time.Time{} })
		return nil, nil
	}
	if !w.steady(sum) {
		return nil, nil // being written: the next check sees the result
	}
	about := fmt.Sprintf("contents: %x", sum)
	if about == w.failed {
		return nil, nil // reported already
	}
	set, err := load(w.path, data, w.opts.Require)
	if err != nil {
		return nil, w.fail(about, err)
	}
	w.applied, w.failed = sum, ""
	w.cur.Store(set)
	w.setStatus(func(s *Status) {
		s.Loaded, s.Err, s.ErrAt = time.Now(), nil, time.Time{}
		s.Reloads++
	})
	return set, nil
}

// steady reads the file again after w.settle and reports whether it still
// has the digest sum. It reports false when the Watcher is closed
// meanwhile.
func (w *Watcher) steady(sum [sha256.Size]byte) bool {
	if w.settle <= 0 {
		return true
	}
	t := time.NewTimer(w.settle)
	defer t.Stop()
	select {
	case <-w.stop:
		return false
	case <-t.C:
	}
	again, err := os.ReadFile(w.path)
	return err == nil && sha256.Sum256(again) == sum
}

// fail records a failure about what, and returns err to report, or nil
// when the same failure was reported already.
func (w *Watcher) fail(about string, err error) error {
	if about == w.failed {
		return nil
	}
	w.failed = about
	w.setStatus(func(s *Status) { s.Err, s.ErrAt = err, time.Now() })
	return err
}

func (w *Watcher) setStatus(change func(*Status)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change(&w.status)
}
