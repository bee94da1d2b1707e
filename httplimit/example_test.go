package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// show sends one request and prints what the client sees.
func show(h http.Handler, r *http.Request) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	fmt.Println(res.StatusCode, "RateLimit:", res.Header.Get("RateLimit"))
	if ra := res.Header.Get("Retry-After"); ra != "" {
		fmt.Println("    Retry-After:", ra)
		b, _ := io.ReadAll(res.Body)
		fmt.Print("    ", string(b))
	}
}

// A coupon route limited per user: three claims in any minute.
func ExampleLimit() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	lim, clk := env.Limiter, env.Clock

	claim := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "coupon claimed\n")
	})
	// In a service, the user comes from authentication; here, a header.
	user := httplimit.User(func(r *http.Request) (string, bool) {
		id := r.Header.Get("X-User-ID")
		return id, id != ""
	})
	rule := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
	h := httplimit.Limit(lim, rule, user, httplimit.Options{})(claim)

	for range 4 {
		r := httptest.NewRequest("POST", "/coupons/claim", nil)
		r.Header.Set("X-User-ID", "alice")
		show(h, r)
		clk.Advance(10 * time.Second)
	}
	// Output:
	// 200 RateLimit: "coupon";r=2;t=60
	// 200 RateLimit: "coupon";r=1;t=60
	// 200 RateLimit: "coupon";r=0;t=60
	// 429 RateLimit: "coupon";r=0;t=30
	//     Retry-After: 30
	//     {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"Too many requests, try again later.","violated-policies":["coupon"]}
}

// An export route: at most one export per user in progress. The slot is
// held while the handler runs and given back when it returns.
func ExampleLimit_concurrency() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()

	started, finish := make(chan struct{}), make(chan struct{})
	export := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("slow") {
			close(started)
			<-finish // the export's work
		}
		io.WriteString(w, "export done\n")
	})
	user := httplimit.User(func(r *http.Request) (string, bool) {
		id := r.Header.Get("X-User-ID")
		return id, id != ""
	})
	rule := ratelimit.Rule{Name: "exports", Kind: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: 1, Window: 30 * time.Second}}
	h := httplimit.Limit(env.Limiter, rule, user, httplimit.Options{})(export)
	request := func(target string) *http.Request {
		r := httptest.NewRequest("POST", target, nil)
		r.Header.Set("X-User-ID", "alice")
		return r
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), request("/exports?slow"))
	}()
	<-started
	show(h, request("/exports")) // the first export is still running
	close(finish)
	<-done
	show(h, request("/exports")) // its slot came back when it returned
	// Output:
	// 429 RateLimit: "exports";r=0;t=30
	//     Retry-After: 30
	//     {"type":"https://pkg.go.dev/github.com/ratelimit-go/ratelimit/httplimit#ProblemConcurrencyExceeded","title":"Too many requests of this client are in progress","status":429,"detail":"Too many requests in progress: try again when one has finished.","violated-policies":["exports"]}
	// 200 RateLimit: "exports";r=0;t=30
}

// Behind a load balancer at 10.0.0.1, X-Forwarded-For is read from the
// right; what the client wrote into it itself is never reached.
func ExampleIP() {
	key := httplimit.IP(httplimit.IPOptions{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
	})
	for _, c := range []struct{ peer, xff string }{
		{"10.0.0.1:41000", "198.51.100.9"},            // through the balancer
		{"10.0.0.1:41000", "1.2.3.4, 198.51.100.9"},   // the client tried to spoof
		{"198.51.100.9:5000", "1.2.3.4"},              // straight in: header ignored
		{"10.0.0.1:41000", "2001:db8:aa:bb:1:2:3:4"},  // IPv6: its /64
		{"[2001:db8:aa:bb::9]:5000", ""},              // the same /64, directly
		{"10.0.0.1:41000", "not-an-ip, 198.51.100.9"}, // garbage left of the client
		{"10.0.0.1:41000", "198.51.100.9, not-an-ip"}, // garbage from the proxy side
	} {
		r := httptest.NewRequest("GET", "/merchants/42", nil)
		r.RemoteAddr = c.peer
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		k, _ := key(r)
		fmt.Println(k)
	}
	// Output:
	// 198.51.100.9
	// 198.51.100.9
	// 198.51.100.9
	// 2001:db8:aa:bb::/64
	// 2001:db8:aa:bb::/64
	// 198.51.100.9
	// 10.0.0.1
}

// Several policies on one route: per IP against scrapers, and a global cap.
// The first denial stops: the global policy records nothing for it.
func ExampleStack() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	lim := env.Limiter

	perIP := ratelimit.Rule{Name: "merchant:ip", Limit: ratelimit.PerSecond(2)}
	global := ratelimit.Rule{Name: "merchant:all", Limit: ratelimit.PerSecond(1000)}
	h := httplimit.Stack(lim, []httplimit.Policy{
		{Name: "per-ip", Rule: perIP, Key: httplimit.IP(httplimit.IPOptions{})},
		{Name: "global", Rule: global, Key: httplimit.Global()},
	}, httplimit.Options{})(http.NotFoundHandler())

	for range 3 {
		r := httptest.NewRequest("GET", "/merchants/42", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	left, _ := lim.Peek(context.Background(), global, "global")
	fmt.Println("global quota left:", left.Remaining)
	// Output:
	// 404 "per-ip";r=1;t=1, "global";r=999;t=1
	// 404 "per-ip";r=0;t=1, "global";r=998;t=1
	// 429 "per-ip";r=0;t=1
	// global quota left: 998
}

// Validate finds a route set up wrongly when the program starts, instead of
// every request of the route failing later.
func ExampleValidate() {
	lim, err := ratelimit.New(nil, ratelimit.Options{}) // local only
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	noRate := ratelimit.Rule{Name: "coupon"} // Limit forgotten
	err = httplimit.Validate(lim, []httplimit.Policy{{Rule: noRate, Key: httplimit.Global()}}, httplimit.Options{})
	fmt.Println(errors.Is(err, httplimit.ErrInvalidSetup), errors.Is(err, ratelimit.ErrInvalidRule))

	ok := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
	fmt.Println(httplimit.Validate(lim, []httplimit.Policy{{Rule: ok, Key: httplimit.Global()}}, httplimit.Options{}))
	// Output:
	// true true
	// <nil>
}

// A completion route limited in tokens per user, whose cost is known only
// once the answer is written: the policy reserves the request's max_tokens,
// and the handler settles the tokens it used, so that the rest is free
// again for the user's next request.
func ExampleSettle() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	lim := env.Limiter

	complete := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used := 120 // the tokens of the answer, known once it is written
		if err := httplimit.Settle(r.Context(), used); err != nil {
			panic(err)
		}
		fmt.Fprintf(w, "%d tokens\n", used)
	})
	user := httplimit.User(func(r *http.Request) (string, bool) {
		id := r.Header.Get("X-User-ID")
		return id, id != ""
	})
	maxTokens := func(r *http.Request) int {
		n, err := strconv.Atoi(r.URL.Query().Get("max_tokens"))
		if err != nil {
			return 256 // no estimate from the client: a default
		}
		return min(max(n, 1), 1000) // within the rule's Rate
	}
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	h := httplimit.Stack(lim, []httplimit.Policy{{Rule: tokens, Key: user, Cost: maxTokens}}, httplimit.Options{})(complete)

	for _, target := range []string{"/complete?max_tokens=800", "/complete?max_tokens=800", "/complete"} {
		r := httptest.NewRequest("POST", target, nil)
		r.Header.Set("X-User-ID", "alice")
		show(h, r)
	}
	left, _ := lim.Peek(context.Background(), tokens, "user:alice")
	fmt.Println("tokens left:", left.Remaining)
	// Output:
	// 200 RateLimit: "tokens";r=200;t=60
	// 200 RateLimit: "tokens";r=80;t=60
	// 200 RateLimit: "tokens";r=504;t=60
	// tokens left: 640
}
