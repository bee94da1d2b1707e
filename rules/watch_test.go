package rules

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// version returns a rules file whose rule "v" has Rate n, and which has a
// rule "extra" when extra is set.
func version(n int, extra bool) string {
	s := fmt.Sprintf("rules:\n  - name: v\n    rate: %d\n    window: 1s\n", n)
	if extra {
		s += "  - name: extra\n    rate: 1\n    window: 1m\n"
	}
	return s
}

// rate returns the Rate of rule "v" in force.
func rate(w *Watcher) int {
	r, _ := w.For("v", "k")
	return r.Limit.Rate
}

// hooks records what a Watcher's hooks were called with.
type hooks struct {
	mu      sync.Mutex
	changes []*Set
	errs    []error
}

func (h *hooks) options(interval time.Duration) WatchOptions {
	return WatchOptions{
		Interval: interval,
		Require:  []string{"v"},
		OnChange: func(s *Set) { h.mu.Lock(); h.changes = append(h.changes, s); h.mu.Unlock() },
		OnError:  func(err error) { h.mu.Lock(); h.errs = append(h.errs, err); h.mu.Unlock() },
	}
}

func (h *hooks) counts() (changes, errs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.changes), len(h.errs)
}

func (h *hooks) lastErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) == 0 {
		return nil
	}
	return h.errs[len(h.errs)-1]
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes data to a new file and renames it over path, as editors
// and deployment tools do.
func replace(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	write(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// noWatcherLeft fails the test unless every Watcher goroutine has ended.
func noWatcherLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "rules.(*Watcher)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a Watcher goroutine is left after Close:\n%s", stacks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watch starts a Watcher that never checks on its own (the test calls
// check), and closes it at the end of the test.
func watch(t *testing.T, path string, h *hooks) *Watcher {
	t.Helper()
	w, err := Watch(path, h.options(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); noWatcherLeft(t) })
	return w
}

// TestReloadInPlace rewrites the file in place, with its size and
// modification time unchanged: the contents decide.
func TestReloadInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, version(5, false))
	st, _ := os.Stat(path)
	var h hooks
	w := watch(t, path, &h)
	if rate(w) != 5 {
		t.Fatalf("first load: rate %d", rate(w))
	}
	write(t, path, version(7, false))
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	w.check()
	if rate(w) != 7 {
		t.Fatalf("after an in-place write: rate %d, want 7", rate(w))
	}
	w.check() // nothing new
	if c, e := h.counts(); c != 1 || e != 0 {
		t.Fatalf("OnChange %d times, OnError %d times; want 1 and 0", c, e)
	}
	if s := w.Status(); s.Reloads != 1 || s.Err != nil || s.Path != path || s.Loaded.IsZero() {
		t.Fatalf("Status() = %+v", s)
	}
	if h.changes[0] != w.Current() {
		t.Fatal("OnChange was not given the rules in force")
	}
}

// TestReloadRenameOver replaces the file by a rename.
func TestReloadRenameOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, version(5, false))
	var h hooks
	w := watch(t, path, &h)
	replace(t, path, version(10, true))
	w.check()
	if rate(w) != 10 {
		t.Fatalf("after a rename over the file: rate %d, want 10", rate(w))
	}
	if _, ok := w.Current().Rule("extra"); !ok {
		t.Fatal("the new rule is missing")
	}
}

// TestReloadConfigMap swaps a Kubernetes ConfigMap's symbolic links as
// the kubelet does: dir/rules.yaml -> ..data/rules.yaml, ..data -> a
// version directory; a new version directory, ..data renamed to point at
// it, the old one removed.
func TestReloadConfigMap(t *testing.T) {
	dir := t.TempDir()
	version1 := filepath.Join(dir, "..2026_11_24_10_00_00.1111")
	if err := os.Mkdir(version1, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(version1, "rules.yaml"), version(5, false))
	st, _ := os.Stat(filepath.Join(version1, "rules.yaml"))
	if err := os.Symlink(filepath.Base(version1), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "rules.yaml"), filepath.Join(dir, "rules.yaml")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	var h hooks
	w := watch(t, path, &h)
	if rate(w) != 5 {
		t.Fatalf("first load: rate %d", rate(w))
	}
	for i, n := range []int{10, 20} {
		next := filepath.Join(dir, fmt.Sprintf("..2026_11_24_10_0%d_00.%d", i+1, 2222*(i+1)))
		if err := os.Mkdir(next, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(next, "rules.yaml"), version(n, false))
		// The same modification time as the first version's: the
		// contents decide, not the times.
		if err := os.Chtimes(filepath.Join(next, "rules.yaml"), st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(next), tmp); err != nil {
			t.Fatal(err)
		}
		old, _ := os.Readlink(filepath.Join(dir, "..data"))
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
		w.check()
		if rate(w) != n {
			t.Fatalf("after swap %d: rate %d, want %d", i+1, rate(w), n)
		}
	}
	if c, e := h.counts(); c != 2 || e != 0 {
		t.Fatalf("OnChange %d times, OnError %d times; want 2 and 0", c, e)
	}
}

// TestReloadBroken writes an invalid file, then one without a required
// rule: the rules in force stay, OnError is called once for each, and a
// good file is applied again.
func TestReloadBroken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, version(5, true))
	var h hooks
	w := watch(t, path, &h)
	before := w.Current()

	write(t, path, version(6, true)+"    windw: 1s\n")
	w.check()
	w.check() // the same broken file: reported once
	if w.Current() != before {
		t.Fatal("a broken file changed the rules in force")
	}
	if c, e := h.counts(); c != 0 || e != 1 {
		t.Fatalf("OnChange %d times, OnError %d times; want 0 and 1", c, e)
	}
	if err := h.lastErr(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), path+`:8: rule "extra": unknown field "windw"`) {
		t.Fatalf("OnError got %v", err)
	}
	if s := w.Status(); s.Err == nil || s.ErrAt.IsZero() {
		t.Fatalf("Status() = %+v", s)
	}

	write(t, path, "rules:\n  - name: extra\n    rate: 9\n    window: 1s\n") // valid, but without "v"
	w.check()
	if w.Current() != before {
		t.Fatal("a file without a required rule changed the rules in force")
	}
	if err := h.lastErr(); !errors.Is(err, ErrMissingRule) || !strings.Contains(err.Error(), `"v"`) {
		t.Fatalf("OnError got %v", err)
	}

	write(t, path, version(5, true)) // back to the rules in force: no change, no error
	w.check()
	if c, e := h.counts(); c != 0 || e != 2 || w.Status().Err != nil {
		t.Fatalf("OnChange %d times, OnError %d times, Status %+v; want 0, 2, no error", c, e, w.Status())
	}
	write(t, path, version(8, false))
	w.check()
	if rate(w) != 8 {
		t.Fatalf("after the fix: rate %d, want 8", rate(w))
	}
}

// TestReloadDeleted deletes the file: an error, never an empty set of
// rules; the file's return is applied.
func TestReloadDeleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, version(5, false))
	var h hooks
	w := watch(t, path, &h)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w.check()
	w.check()
	if rate(w) != 5 || len(w.Current().Names()) != 1 {
		t.Fatalf("a deleted file changed the rules: %v", w.Current().Names())
	}
	if _, e := h.counts(); e != 1 || !errors.Is(h.lastErr(), fs.ErrNotExist) {
		t.Fatalf("OnError %d times, last %v; want once, fs.ErrNotExist", e, h.lastErr())
	}
	if !errors.Is(w.Status().Err, fs.ErrNotExist) {
		t.Fatalf("Status().Err = %v", w.Status().Err)
	}
	write(t, path, version(6, false))
	w.check()
	if rate(w) != 6 || w.Status().Err != nil {
		t.Fatalf("after the file came back: rate %d, Status %+v", rate(w), w.Status())
	}
}

// TestReloadRapidWrites writes many versions quickly, in place and by
// rename, while the Watcher checks on its own every few milliseconds: the
// versions it applies only go up, and the last one wins.
func TestReloadRapidWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, version(1, false))
	var mu sync.Mutex
	var seen []int
	w, err := Watch(path, WatchOptions{
		Interval: 2 * time.Millisecond,
		Require:  []string{"v"},
		OnChange: func(s *Set) {
			r, _ := s.Rule("v")
			mu.Lock()
			seen = append(seen, r.Limit.Rate)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const last = 200
	for n := 2; n <= last; n++ {
		if n%2 == 0 {
			replace(t, path, version(n, false))
		} else {
			write(t, path, version(n, false))
		}
		if n%20 == 0 {
			time.Sleep(10 * time.Millisecond) // let some versions in between be applied
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for rate(w) != last {
		if time.Now().After(deadline) {
			t.Fatalf("the last version was never applied: rate %d", rate(w))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	noWatcherLeft(t)
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("versions applied out of order: %v", seen)
		}
	}
	t.Logf("%d of %d versions applied", len(seen), last-1)
}

// TestWatchOnItsOwn checks that the Watcher's own checks notice a change,
// that Close ends its goroutine, and that Close may be called twice.
func TestWatchOnItsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write(t, path, version(5, false))
	before := runtime.NumGoroutine()
	changed := make(chan *Set, 1)
	w, err := Watch(path, WatchOptions{Interval: 10 * time.Millisecond, OnChange: func(s *Set) { changed <- s }})
	if err != nil {
		t.Fatal(err)
	}
	replace(t, path, version(10, false))
	s := <-changed
	if r, _ := s.Rule("v"); r.Limit.Rate != 10 || rate(w) != 10 {
		t.Fatalf("OnChange got rate %d, Current %d", r.Limit.Rate, rate(w))
	}
	w.Close()
	w.Close()
	noWatcherLeft(t)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before Watch", runtime.NumGoroutine(), before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rate(w) != 10 {
		t.Fatal("the rules in force must stay readable after Close")
	}
}

// TestWatchFails checks that Watch refuses what its first load cannot
// use, and starts no goroutine then.
func TestWatchFails(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	write(t, good, version(5, false))
	bad := filepath.Join(dir, "bad.yaml")
	write(t, bad, "rules: []\n")
	cases := []struct {
		path string
		opts WatchOptions
		is   error
	}{
		{filepath.Join(dir, "none.yaml"), WatchOptions{}, fs.ErrNotExist},
		{bad, WatchOptions{}, ErrInvalid},
		{good, WatchOptions{Require: []string{"v", "w"}}, ErrMissingRule},
		{good, WatchOptions{Interval: -time.Second}, ErrInvalid},
	}
	for _, c := range cases {
		w, err := Watch(c.path, c.opts)
		if !errors.Is(err, c.is) {
			t.Errorf("Watch(%s, %+v) = %v, %v; want an error wrapping %v", c.path, c.opts, w, err, c.is)
		}
	}
	noWatcherLeft(t)
}
