package redistest

import (
	"fmt"
	"runtime"
	"testing"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of acting
// on them; both end the calling goroutine, as the real ones do.
type recorder struct {
	testing.TB
	skipped, fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// lookMissing runs lookBinary for a binary that does not exist.
func lookMissing(t *testing.T) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		lookBinary(r, "redistest-no-such-binary")
	}()
	<-done
	return r
}

func TestMissingBinarySkips(t *testing.T) {
	t.Setenv(RequireEnv, "")
	r := lookMissing(t)
	if r.skipped == "" || r.fatal != "" {
		t.Fatalf("skipped %q, fatal %q; want a skip", r.skipped, r.fatal)
	}
	t.Logf("skip message: %s", r.skipped)
}

func TestMissingBinaryFailsWhenRequired(t *testing.T) {
	t.Setenv(RequireEnv, "1")
	r := lookMissing(t)
	if r.fatal == "" || r.skipped != "" {
		t.Fatalf("skipped %q, fatal %q; want a failure", r.skipped, r.fatal)
	}
}

func TestBinaryFound(t *testing.T) {
	if p := Binary(t); p == "" {
		t.Fatal("Binary returned an empty path")
	}
}
