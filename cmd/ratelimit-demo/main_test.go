package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/redis/rueidis"
)

var update = flag.Bool("update", false, "rewrite testdata/story.golden")

const golden = "testdata/story.golden"

// TestStory runs the demo as `go run ./cmd/ratelimit-demo` does and checks
// every byte it prints.
func TestStory(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, "", "", "", "", ""); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		t.Fatalf("the story changed (go test -update rewrites %s):\n%s", golden, got)
	}
}

// storyOn returns the story as the demo tells it on a Redis it must not
// stop, from its second line on: the embedded story's, with the outage
// told as the cut of the demo's proxy.
func storyOn(t *testing.T) string {
	t.Helper()
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(want), "\n")
	embedded, cut := stopMiniredis(nil), cutProxy(nil)
	return strings.NewReplacer(embedded.title2, cut.title2, embedded.down, cut.down, embedded.title3, cut.title3).Replace(rest)
}

// playOnYourRedis plays the demo as `-redis addr` does, after leaving an
// earlier run's state in that Redis, and checks every line but the first
// (which names the address).
func playOnYourRedis(t *testing.T, addr string) {
	t.Helper()
	c := newClient(t, addr)
	// An earlier run's state must not leak into the story.
	lim, err := ratelimit.New(c, storyOptions(ratelimittest.NewClock(storyStart)))
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		lim.Allow(t.Context(), storyRule, "alice")
	}
	lim.Close()

	var out bytes.Buffer
	if err := run(&out, addr, "", "", "", ""); err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(out.String(), "\n")
	if !strings.Contains(first, "Redis at "+addr) || !strings.Contains(first, "your server keeps running") {
		t.Errorf("first line %q: want it to name the server and say it keeps running", first)
	}
	if want := storyOn(t); rest != want {
		t.Fatalf("got:\n%s\nwant:\n%s", rest, want)
	}
	// The server was never stopped: the client made before the story
	// still talks to it.
	if err := c.Do(t.Context(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("PING %s after the story: %v", addr, err)
	}
}

// TestStoryOnYourRedis plays all three acts with -redis, on a miniredis
// standing for your server: the outage cuts the demo's proxy, never the
// server.
func TestStoryOnYourRedis(t *testing.T) {
	playOnYourRedis(t, miniredis.RunT(t).Addr())
}

// TestStoryOnRedisServer is TestStoryOnYourRedis on a real redis-server,
// which must still run, the same process, after the story.
func TestStoryOnRedisServer(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	pid, err := srv.Do("INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	playOnYourRedis(t, srv.Addr())
	after, err := srv.Do("INFO", "server")
	if !srv.Running() || err != nil || processID(after) == "" || processID(after) != processID(pid) {
		t.Fatalf("redis-server after the story: running %v, process_id %q (before %q), %v", srv.Running(), processID(after), processID(pid), err)
	}
}

// processID returns the process_id field of INFO server.
func processID(info string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return v
		}
	}
	return ""
}

// TestStoryWithoutOutage: without a way to take Redis away (a Sentinel
// URL, which the proxy cannot carry), the demo plays act 1 and says why it
// stops.
func TestStoryWithoutOutage(t *testing.T) {
	mr := miniredis.RunT(t)
	var out bytes.Buffer
	if err := story(&out, newClient(t, mr.Addr()), nil); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	_, act1, _ := strings.Cut(string(want), "\n")
	act1, _, _ = strings.Cut(act1, "\n2. ")
	act1 += "\nActs 2 and 3 take Redis away and give it back: the demo does that to its embedded miniredis,\n" +
		"or by cutting a proxy of its own to a single Redis server; it cannot here, so it stops.\n"
	if out.String() != act1 {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), act1)
	}
}

func newClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
		Dialer: net.Dialer{Timeout: 5 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// shopRequest sends one request to the shop from remote.
func shopRequest(h http.Handler, method, path, remote string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestShop(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := ratelimittest.NewClock(time.Date(2026, 11, 11, 20, 0, 0, 0, time.UTC))
	// The shop's answers are checked exactly as Redis gives them: a busy
	// machine under the race detector must not push a call past its budget
	// into the fallback (the default Timeout is 100ms).
	lim, err := ratelimit.New(newClient(t, mr.Addr()), ratelimit.Options{Clock: clk, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	shop := newShop(lim, httplimit.IPOptions{})
	const alice, mallory = "198.51.100.7:4000", "203.0.113.66:5000"

	t.Run("flash sale: 100 per 10s for everyone", func(t *testing.T) {
		for i := range 100 {
			w := shopRequest(shop, "POST", "/flash-sale/orders", "192.0.2."+strconv.Itoa(i)+":1")
			if w.Code != http.StatusCreated {
				t.Fatalf("order %d: %d", i+1, w.Code)
			}
		}
		w := shopRequest(shop, "POST", "/flash-sale/orders", alice)
		if w.Code != 429 || w.Header().Get("RateLimit") != `"shop:flash-sale";r=0;t=10` ||
			w.Header().Get("RateLimit-Policy") != `"shop:flash-sale";q=100;w=10` ||
			!strings.Contains(w.Body.String(), `"detail":"The flash sale is busy, try again in a few seconds."`) {
			t.Fatalf("order 101: %d %v %s", w.Code, w.Header(), w.Body)
		}
		clk.Advance(10 * time.Second)
		if w := shopRequest(shop, "POST", "/flash-sale/orders", alice); w.Code != http.StatusCreated {
			t.Fatalf("after 10s: %d", w.Code)
		}
	})

	t.Run("coupons: 3 a minute per user, then warnings and a ban", func(t *testing.T) {
		for i, want := range []struct {
			code           int
			limit, warning string
		}{
			{200, `"shop:coupon";r=2;t=60`, ""},
			{200, `"shop:coupon";r=1;t=60`, ""},
			{200, `"shop:coupon";r=0;t=60`, ""},
			{429, `"shop:coupon";r=0;t=60`, ""},
			{429, `"shop:coupon";r=0;t=60`, `"shop:coupon";violations=2;ban-after=4`},
			{429, `"shop:coupon";r=0;t=60`, `"shop:coupon";violations=3;ban-after=4`},
			{429, `"shop:coupon";r=0;t=300`, ""}, // banned for 5 minutes
		} {
			w := shopRequest(shop, "POST", "/coupons/claim", alice, userHeader, "alice")
			if w.Code != want.code || w.Header().Get("RateLimit") != want.limit || w.Header().Get("RateLimit-Warning") != want.warning {
				t.Fatalf("claim %d: %d %q %q", i+1, w.Code, w.Header().Get("RateLimit"), w.Header().Get("RateLimit-Warning"))
			}
		}
		if w := shopRequest(shop, "POST", "/coupons/claim", alice, userHeader, "bob"); w.Code != 200 || w.Body.String() != `{"coupon":"claimed","user":"bob"}`+"\n" {
			t.Fatalf("bob, from alice's address: %d %s", w.Code, w.Body)
		}
		if w := shopRequest(shop, "POST", "/coupons/claim", alice); w.Code != http.StatusForbidden {
			t.Fatalf("anonymous claim: %d", w.Code)
		}
	})

	t.Run("merchant pages: 5 a second per IP, spoofing changes nothing", func(t *testing.T) {
		for i := range 5 {
			if w := shopRequest(shop, "GET", "/merchants/42", mallory); w.Code != 200 {
				t.Fatalf("page %d: %d", i+1, w.Code)
			}
		}
		if w := shopRequest(shop, "GET", "/merchants/42", mallory, "X-Forwarded-For", "1.2.3.4"); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("spoofed 6th page: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
		}
		if w := shopRequest(shop, "GET", "/merchants/42", alice); w.Code != 200 || w.Body.String() != `{"merchant":"42","name":"Noodle House"}`+"\n" {
			t.Fatalf("another client: %d %s", w.Code, w.Body)
		}
	})

	t.Run("behind a trusted proxy, per client", func(t *testing.T) {
		behind := newShop(lim, httplimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
		clk.Advance(time.Second)
		for i := range 6 {
			w := shopRequest(behind, "GET", "/merchants/7", "10.0.0.2:80", "X-Forwarded-For", "203.0.113.9")
			want := http.StatusOK
			if i == 5 {
				want = http.StatusTooManyRequests
			}
			if w.Code != want {
				t.Fatalf("page %d: %d, want %d", i+1, w.Code, want)
			}
		}
		if w := shopRequest(behind, "GET", "/merchants/7", "10.0.0.2:80", "X-Forwarded-For", "203.0.113.10"); w.Code != 200 {
			t.Fatalf("another client through the proxy: %d", w.Code)
		}
	})
}

// TestShopOverTCP serves the shop on a real socket on the real clock, as
// -serve does.
func TestShopOverTCP(t *testing.T) {
	lim, err := ratelimit.New(nil, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	srv := httptest.NewServer(newShop(lim, httplimit.IPOptions{}))
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/merchants/1")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("RateLimit") != `"shop:merchant";r=4;t=1` {
		t.Fatalf("%d %q", res.StatusCode, res.Header.Get("RateLimit"))
	}
}

func TestFlags(t *testing.T) {
	ps, err := parsePrefixes(" 10.0.0.0/8, 192.0.2.1 ,2001:db8::/32,")
	if err != nil || len(ps) != 3 || ps[1] != netip.MustParsePrefix("192.0.2.1/32") {
		t.Fatalf("parsePrefixes: %v, %v", ps, err)
	}
	if _, err := parsePrefixes("10.0.0.0/33"); err == nil {
		t.Fatal("parsePrefixes accepted 10.0.0.0/33")
	}
	for _, c := range []struct{ addr, url, want string }{
		{"", "", "embedded miniredis"},
		{"db:6379", "redis://other:6380", "Redis at db:6379"},
		{"", "redis://other:6380/0", "Redis at other:6380"},
	} {
		if _, where, err := clientOption(c.addr, c.url); err != nil || where != c.want {
			t.Errorf("clientOption(%q, %q) = %q, %v; want %q", c.addr, c.url, where, err, c.want)
		}
	}
	if _, _, err := clientOption("", "http://x"); err == nil {
		t.Error("clientOption accepted REDIS_URL http://x")
	}
	tcp := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	for addr, want := range map[string]string{":8080": "http://localhost:8080", "127.0.0.1:8080": "http://127.0.0.1:8080", "[::]:8080": "http://localhost:8080"} {
		if got := baseURL(tcp, addr); got != want {
			t.Errorf("baseURL(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestTipsSayWhatForwardedForDoes: the shop's tips promise that a forged
// X-Forwarded-For changes nothing only when no proxy is trusted.
func TestTipsSayWhatForwardedForDoes(t *testing.T) {
	var none, some bytes.Buffer
	printTips(&none, "http://127.0.0.1:8080", "limits kept in miniredis", nil)
	printTips(&some, "http://127.0.0.1:8080", "limits kept in miniredis", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	if !strings.Contains(none.String(), "A forged X-Forwarded-For changes nothing") {
		t.Errorf("without -trust the tips do not say a forged X-Forwarded-For changes nothing:\n%s", none.String())
	}
	if strings.Contains(some.String(), "changes nothing: no proxy") || !strings.Contains(some.String(), "only when the request comes from a proxy in [127.0.0.0/8]") {
		t.Errorf("with -trust the tips misstate X-Forwarded-For:\n%s", some.String())
	}
}

// TestBannerSaysWhereLimitsAreKept: with Redis out of reach at startup,
// -serve's banner says so, and that decisions are local until it can be
// reached, instead of that the limits are kept in Redis.
func TestBannerSaysWhereLimitsAreKept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there from now on
	mr := miniredis.RunT(t)
	for _, c := range []struct {
		addr, want string
	}{
		{down, "Redis at " + down + " cannot be reached yet: decisions are local, this process's alone,\nuntil it can"},
		{mr.Addr(), "limits kept in Redis at " + mr.Addr() + "."},
	} {
		lim, err := ratelimit.Dial(rueidis.ClientOption{InitAddress: []string{c.addr}},
			ratelimit.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		printTips(&b, "http://127.0.0.1:8080", limitsKept(lim, "Redis at "+c.addr), nil)
		lim.Close()
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("Redis at %s: the banner lacks %q:\n%s", c.addr, c.want, b.String())
		}
	}
}
