package rules_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/ratelimit-go/ratelimit/rules"
)

const inspected = `rules:
  - name: shop:coupon
    rate: 3
    window: 1m
    penalty:
      warn_after: 1
      ban_after: 2
      ban_for: 5m
    overrides:
      - key: user:gold
        rate: 30
  - name: "<script>alert('x')</script>"
    kind: gcra
    rate: 10
    window: 1s
    burst: 20
    dry_run: true
`

// inspection is a Watcher on a file, a Limiter on a fake clock, and the
// inspection handler over both.
type inspection struct {
	path string
	w    *rules.Watcher
	lim  *ratelimit.Limiter
	clk  *ratelimittest.Clock
	srv  *httptest.Server
}

func newInspection(t *testing.T, interval time.Duration) *inspection {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(inspected), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := rules.Watch(path, rules.WatchOptions{Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	clk := ratelimittest.NewClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	lim, err := ratelimit.New(nil, ratelimit.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	mux := http.NewServeMux()
	mux.Handle("/limits/", http.StripPrefix("/limits", rules.Handler(w, lim)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &inspection{path: path, w: w, lim: lim, clk: clk, srv: srv}
}

func (in *inspection) get(t *testing.T, query string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, in.srv.URL+"/limits/"+query, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := in.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// report is the JSON the handler answers, as far as the tests read it.
type report struct {
	Source struct {
		Path    string `json:"path"`
		Reloads int    `json:"reloads"`
		Error   string `json:"error"`
	} `json:"source"`
	Rules []struct {
		Name      string `json:"name"`
		Kind      string `json:"kind"`
		Rate      int    `json:"rate"`
		Window    string `json:"window"`
		Burst     int    `json:"burst"`
		DryRun    bool   `json:"dry_run"`
		Overrides []struct {
			Key  string `json:"key"`
			Rate int    `json:"rate"`
		} `json:"overrides"`
	} `json:"rules"`
	Stats struct {
		RedisInUse       bool `json:"redis_in_use"`
		BreakersOpen     int  `json:"breakers_open"`
		Instances        int  `json:"instances"`
		WriteBackPending int  `json:"write_back_pending"`
	} `json:"stats"`
	Query *struct {
		Rule     string `json:"rule"`
		Key      string `json:"key"`
		Override bool   `json:"override"`
		Error    string `json:"error"`
		State    *struct {
			NoState    bool   `json:"no_state"`
			WouldAllow bool   `json:"would_allow"`
			Quota      int    `json:"quota"`
			Remaining  int    `json:"remaining"`
			Violations int    `json:"violations"`
			Banned     bool   `json:"banned"`
			BannedFor  string `json:"banned_for"`
			RetryAfter string `json:"retry_after"`
		} `json:"state"`
	} `json:"query"`
}

func (in *inspection) report(t *testing.T, query string) report {
	t.Helper()
	res, body := in.get(t, query)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s: %d %s\n%s", query, res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	var r report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	return r
}

func TestInspectJSON(t *testing.T) {
	in := newInspection(t, time.Hour)
	r := in.report(t, "?format=json")
	if r.Source.Path != in.path || r.Source.Error != "" || len(r.Rules) != 2 {
		t.Fatalf("report: %+v", r)
	}
	c := r.Rules[1]
	if c.Name != "shop:coupon" || c.Kind != "sliding-log" || c.Rate != 3 || c.Window != "1m0s" ||
		len(c.Overrides) != 1 || c.Overrides[0].Key != "user:gold" || c.Overrides[0].Rate != 30 {
		t.Fatalf("shop:coupon: %+v", c)
	}
	if g := r.Rules[0]; g.Kind != "gcra" || g.Burst != 20 || !g.DryRun {
		t.Fatalf("the gcra rule: %+v", g)
	}
	if r.Stats.RedisInUse || r.Stats.BreakersOpen != 0 || r.Stats.Instances != 0 || r.Stats.WriteBackPending != 0 {
		t.Fatalf("a local-only Limiter's stats: %+v", r.Stats)
	}

	// A key's state: two events and two violations ban alice.
	coupon, _ := in.w.For("shop:coupon", "user:alice")
	for range 5 {
		in.lim.Allow(context.Background(), coupon, "user:alice")
	}
	for range 2 { // Peek changes nothing: twice the same answer
		q := in.report(t, "?format=json&rule=shop:coupon&key=user:alice").Query
		if q == nil || q.State == nil || q.Override || q.State.WouldAllow || q.State.Quota != 3 || q.State.Remaining != 0 ||
			q.State.Violations != 2 || !q.State.Banned || q.State.BannedFor != "5m0s" {
			t.Fatalf("alice: %+v %+v", q, q.State)
		}
	}
	q := in.report(t, "?format=json&rule=shop:coupon&key=user:gold").Query
	if !q.Override || q.State.Quota != 30 || q.State.Remaining != 30 {
		t.Fatalf("gold: %+v %+v", q, q.State)
	}
	if q := in.report(t, "?format=json&rule=nope&key=k").Query; q.Error == "" || q.State != nil {
		t.Fatalf("an unknown rule: %+v", q)
	}
	if q := in.report(t, "?format=json&rule=shop:coupon").Query; q.Error == "" || q.State != nil {
		t.Fatalf("no key: %+v", q)
	}
	// Accept: application/json without ?format.
	if res, _ := in.get(t, "", "Accept", "application/json"); res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("Accept: application/json answered %s", res.Header.Get("Content-Type"))
	}
}

func TestInspectHTML(t *testing.T) {
	in := newInspection(t, time.Hour)
	res, body := in.get(t, "?rule=shop:coupon&key=user:bob", "Accept", "text/html,application/xhtml+xml")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, want := range []string{"<code>shop:coupon</code>", "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;", "<code>user:gold</code>: 30 per 1m0s",
		"3 of 3", in.path} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Error("a rule's name reached the page unescaped")
	}
}

// TestInspectRoundsDurations: the page shows a ban's remaining time as a
// person reads it; the JSON keeps it exact.
func TestInspectRoundsDurations(t *testing.T) {
	in := newInspection(t, time.Hour)
	coupon, _ := in.w.For("shop:coupon", "user:alice")
	for range 5 { // two violations ban alice for 5m
		in.lim.Allow(context.Background(), coupon, "user:alice")
	}
	in.clk.Advance(12*time.Second + 360955*time.Microsecond)
	const query = "?rule=shop:coupon&key=user:alice"
	if s := in.report(t, query+"&format=json").Query.State; s == nil || s.BannedFor != "4m47.639045s" || s.RetryAfter != "4m47.639045s" {
		t.Fatalf("the JSON's state: %+v, want banned for 4m47.639045s exactly", s)
	}
	_, body := in.get(t, query)
	if !strings.Contains(body, "yes, for 4m48s") || !strings.Contains(body, "<td>4m48s</td>") || strings.Contains(body, "4m47.6") {
		t.Errorf("the page does not round the ban's 4m47.639045s to 4m48s:\n%s", body)
	}
}

// TestInspectSaysNoState: a key with no state at all (mistyped, never
// seen, or expired) is said to have none, on the page and in the JSON; a
// key with events is not.
func TestInspectSaysNoState(t *testing.T) {
	in := newInspection(t, time.Hour)
	const noState = "no state: never seen, or expired; check the key"
	coupon, _ := in.w.For("shop:coupon", "user:bob")
	in.lim.Allow(context.Background(), coupon, "user:bob")
	for _, c := range []struct {
		key  string
		want bool
	}{{"user:bob", false}, {"user:bbo", true}, {"bob", true}} {
		query := "?rule=shop:coupon&key=" + c.key
		if s := in.report(t, query+"&format=json").Query.State; s == nil || s.NoState != c.want {
			t.Errorf("%s: the JSON's state %+v, want no_state %v", c.key, s, c.want)
		}
		if _, body := in.get(t, query); strings.Contains(body, noState) != c.want {
			t.Errorf("%s: the page says %q: %v, want %v", c.key, noState, !c.want, c.want)
		}
	}
	in.clk.Advance(time.Minute) // bob's one event leaves the window
	if s := in.report(t, "?format=json&rule=shop:coupon&key=user:bob").Query.State; !s.NoState {
		t.Errorf("bob after his event expired: %+v, want no_state", s)
	}
}

// TestInspectSaysWhetherConnected: a Limiter without Redis is said to
// decide locally, and its instance count of 0 is explained.
func TestInspectSaysWhetherConnected(t *testing.T) {
	in := newInspection(t, time.Hour)
	_, body := in.get(t, "")
	for _, want := range []string{
		`<td id="connected"><span class="warning">no</span>: every decision is local`,
		`<td id="instances">0 (no heartbeat has reached Redis: not connected)</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}

func TestInspectIsReadOnly(t *testing.T) {
	in := newInspection(t, time.Hour)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, in.srv.URL+"/limits/", nil)
		res, err := in.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d", method, res.StatusCode)
		}
	}
	if res, _ := in.get(t, "?format=xml"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("?format=xml: %d", res.StatusCode)
	}
	if _, pattern := http.DefaultServeMux.Handler(httptest.NewRequest(http.MethodGet, "/limits/", nil)); pattern != "" {
		t.Errorf("something registered %q on http.DefaultServeMux", pattern)
	}
}

// TestInspectShowsReloads checks that the page follows the file: a new
// rule after a reload, and a broken file's error.
func TestInspectShowsReloads(t *testing.T) {
	in := newInspection(t, 20*time.Millisecond)
	if err := os.WriteFile(in.path, []byte(inspected+"  - name: shop:new\n    rate: 1\n    window: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return in.w.Status().Reloads == 1 })
	if r := in.report(t, "?format=json"); len(r.Rules) != 3 || r.Rules[2].Name != "shop:new" || r.Source.Reloads != 1 {
		t.Fatalf("after the reload: %+v", r)
	}
	if err := os.WriteFile(in.path, []byte("rules: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the error", func() bool { return in.w.Status().Err != nil })
	if r := in.report(t, "?format=json"); len(r.Rules) != 3 || !strings.Contains(r.Source.Error, "rules: want a list of at least one rule") {
		t.Fatalf("after a broken file: %+v", r)
	}
}

// waitFor polls cond for up to 10 s: a bound on a hang, not a speed check.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
