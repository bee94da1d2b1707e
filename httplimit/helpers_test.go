package httplimit_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// epoch is where the tests' fake clocks start.
var epoch = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

var discard = slog.New(slog.DiscardHandler)

// env is a limiter on a fresh miniredis with a fake clock.
type env struct {
	mr  *miniredis.Miniredis
	clk *ratelimittest.Clock
	lim *ratelimit.Limiter
}

func newEnv(t testing.TB) *env {
	t.Helper()
	// A generous Timeout: under -race a call to miniredis can take longer
	// than the default 100ms, and a timed-out call is decided locally.
	l, err := ratelimittest.NewLimiter(ratelimit.Options{Clock: ratelimittest.NewClock(epoch), Logger: discard, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("ratelimittest.NewLimiter: %v", err)
	}
	t.Cleanup(l.Close)
	return &env{mr: l.Redis, clk: l.Clock, lim: l.Limiter}
}

// ok is the handler behind the middleware under test.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "ok\n")
})

// get sends a GET from remote through h and returns the response.
func get(h http.Handler, remote string, header ...string) *http.Response {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func body(t testing.TB, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
