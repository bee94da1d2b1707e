package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
)

// BenchmarkLimit measures the middleware around a local-only Limiter, so
// that the cost is the middleware's and the in-process log's, not Redis'.
func BenchmarkLimit(b *testing.B) {
	lim, err := ratelimit.New(nil, ratelimit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer lim.Close()
	rule := ratelimit.Rule{Name: "bench", Limit: ratelimit.Limit{Rate: 1 << 30, Window: time.Millisecond}}
	h := httplimit.Limit(lim, rule, httplimit.IP(httplimit.IPOptions{}), httplimit.Options{})(ok)
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "198.51.100." + strconv.Itoa(int(n.Add(1)%250)) + ":1"
		w := httptest.NewRecorder()
		for pb.Next() {
			clear(w.Header())
			h.ServeHTTP(w, r)
		}
	})
}
