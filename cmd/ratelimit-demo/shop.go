package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/policy"
	"github.com/ratelimit-go/ratelimit/rules"
	"github.com/redis/rueidis"
)

// defaultRules is the rules file -serve reads without -rules: the
// shop's rules, one per route, as the variables below write them
// (TestDefaultRules checks that they agree).
//
//go:embed rules.yaml
var defaultRules []byte

// builtin is defaultRules, parsed: the rules newShop limits the routes by.
var builtin, _ = rules.Parse(defaultRules)

// shopRules names the rule of each route, in the order of the routes:
// the rules a rules file must have (WatchOptions.Require).
var shopRules = []string{flashSaleRule.Name, couponRule.Name, merchantRule.Name, exportRule.Name, tokensRule.Name}

// The shop's rules, one per route, as defaultRules writes them (without
// its overrides).
var (
	// flashSaleRule protects the flash sale from overload: 100 orders in
	// any 10 seconds, from everyone together.
	flashSaleRule = ratelimit.Rule{Name: "shop:flash-sale", Limit: ratelimit.Limit{Rate: 100, Window: 10 * time.Second}}
	// couponRule stops coupon farming: 3 claims a minute per user; a user
	// who keeps trying is warned, then banned for 5 minutes.
	couponRule = ratelimit.Rule{Name: "shop:coupon", Limit: ratelimit.PerMinute(3),
		Penalty: &ratelimit.Penalty{WarnAfter: 2, BanAfter: 4, BanFor: 5 * time.Minute}}
	// merchantRule slows scrapers down: 5 merchant pages a second per
	// client IP (per /64 for IPv6).
	merchantRule = ratelimit.Rule{Name: "shop:merchant", Limit: ratelimit.PerSecond(5)}
	// exportRule bounds how many order exports a user runs at once: 2;
	// an export's slot lives 30 seconds unless renewed (the middleware
	// holds it while the export runs, and gives it back when it ends).
	exportRule = ratelimit.Rule{Name: "shop:export", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 2, Window: 30 * time.Second}}
	// tokensRule bounds what a user's completions cost the shop's model:
	// 4000 tokens in any minute. A request reserves its max_tokens (an
	// estimate) and settles the tokens its answer used.
	tokensRule = ratelimit.Rule{Name: "shop:tokens", Limit: ratelimit.PerMinute(4000)}
)

// The fake model behind POST /complete: its answers are at most
// modelMaxTokens long, or max_tokens when the request says so. A request
// without max_tokens reserves defaultEstimate, and its answer may cost
// more.
const (
	modelMaxTokens  = 1000
	defaultEstimate = 256
)

// answerTokens is how many tokens the fake model's answer takes, at most
// limit: a random length, as a model's.
var answerTokens = func(limit int) int { return rand.IntN(limit) + 1 }

// exportTakes is how long an order export runs in this demo.
var exportTakes = 3 * time.Second

// userHeader carries the user id in this demo. A real shop takes the user
// from its authentication (a session, a verified token), never from a
// header the client may set to anything.
const userHeader = "X-User-ID"

// newShop returns the shop's routes, each limited by its rule from the
// default rules file.
func newShop(lim *ratelimit.Limiter, ip httplimit.IPOptions) http.Handler {
	return shopWith(lim, ip, builtin)
}

// shopWith returns the shop's routes, each limited by its rule from src,
// asked at each request: a rules file that is reloaded changes the limits
// from the next request. The handlers know nothing of the limits: the
// middleware around them declares them.
func shopWith(lim *ratelimit.Limiter, ip httplimit.IPOptions, src policy.RuleSource) http.Handler {
	opts := httplimit.Options{DegradedHeader: true}
	user := httplimit.User(func(r *http.Request) (string, bool) {
		id := r.Header.Get(userHeader)
		return id, id != ""
	})
	route := func(name string, key httplimit.KeyFunc, opts httplimit.Options) func(http.Handler) http.Handler {
		return httplimit.Stack(lim, []httplimit.Policy{{Rules: src, RuleName: name, Key: key}}, opts)
	}
	flashSale := route(flashSaleRule.Name, httplimit.Global(),
		httplimit.Options{DegradedHeader: true, Message: "The flash sale is busy, try again in a few seconds."})
	perUser := route(couponRule.Name, user, opts)
	perIP := route(merchantRule.Name, httplimit.IP(ip), opts)
	exports := route(exportRule.Name, user, opts)
	// Completions reserve an estimate of their tokens, settled by the
	// handler once the answer is written (httplimit.Settle).
	completions := httplimit.Stack(lim, []httplimit.Policy{{Rules: src, RuleName: tokensRule.Name, Key: user, Cost: estimateTokens}}, opts)

	mux := http.NewServeMux()
	mux.Handle("POST /flash-sale/orders", flashSale(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusCreated, `{"order":"accepted"}`)
	})))
	mux.Handle("POST /coupons/claim", perUser(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, `{"coupon":"claimed","user":`+strconv.Quote(r.Header.Get(userHeader))+`}`)
	})))
	mux.Handle("GET /merchants/{id}", perIP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, `{"merchant":`+strconv.Quote(r.PathValue("id"))+`,"name":"Noodle House"}`)
	})))
	mux.Handle("POST /exports", exports(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(exportTakes): // the export's work
			reply(w, http.StatusOK, `{"export":"done","user":`+strconv.Quote(r.Header.Get(userHeader))+`}`)
		case <-r.Context().Done(): // the client left, or the slot was lost
		}
	})))
	// A max_tokens the model cannot take is refused before the limit:
	// it records nothing.
	mux.Handle("POST /complete", checkMaxTokens(completions(http.HandlerFunc(complete))))
	return mux
}

// maxTokens returns the request's max_tokens query parameter, the longest
// answer it takes: 0 when it has none, an error when it is not a number
// from 1 to modelMaxTokens.
func maxTokens(r *http.Request) (int, error) {
	v := r.URL.Query().Get("max_tokens")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > modelMaxTokens {
		return 0, fmt.Errorf("max_tokens must be a number from 1 to %d", modelMaxTokens)
	}
	return n, nil
}

// checkMaxTokens refuses a request whose max_tokens is not one, with 400.
func checkMaxTokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := maxTokens(r); err != nil {
			reply(w, http.StatusBadRequest, `{"error":`+strconv.Quote(err.Error())+`}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// estimateTokens is the Cost of a completion: its max_tokens, or
// defaultEstimate without one.
func estimateTokens(r *http.Request) int {
	if n, _ := maxTokens(r); n > 0 {
		return n
	}
	return defaultEstimate
}

// complete is a fake language model's completion: its answer takes a
// random number of tokens, up to max_tokens (the model's own limit without
// one), known only once it is written. It settles the request's
// reservation at that count: the tokens of the estimate it did not use
// are free again at once, and an answer longer than the estimate is
// charged the extra.
func complete(w http.ResponseWriter, r *http.Request) {
	limit, _ := maxTokens(r)
	if limit == 0 {
		limit = modelMaxTokens
	}
	used := answerTokens(limit)
	if err := httplimit.Settle(r.Context(), used); err != nil {
		reply(w, http.StatusInternalServerError, `{"error":`+strconv.Quote(err.Error())+`}`)
		return
	}
	reply(w, http.StatusOK, fmt.Sprintf(`{"user":%s,"estimated_tokens":%d,"actual_tokens":%d}`,
		strconv.Quote(r.Header.Get(userHeader)), estimateTokens(r), used))
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body+"\n")
}

// serve runs the shop on addr until SIGINT or SIGTERM, on the real clock,
// with the rules of the file at rulesPath (the default rules when it is
// ""), reloaded when the file changes. The inspection page listens on
// loopback only.
func serve(w io.Writer, opt rueidis.ClientOption, where, addr, rulesPath string, proxies []netip.Prefix) error {
	rulesPath, cleanup, err := rulesFile(w, rulesPath)
	if err != nil {
		return err
	}
	defer cleanup()
	watcher, err := rules.Watch(rulesPath, rules.WatchOptions{
		Require:  shopRules,
		OnChange: func(s *rules.Set) { fmt.Fprintf(w, "rules: reloaded %s: %s\n", rulesPath, describeRules(s)) },
		OnError:  func(err error) { fmt.Fprintf(w, "rules: refused, the rules in force stay: %v\n", err) },
	})
	if err != nil {
		return err
	}
	defer watcher.Close()
	// Dial sets the client's Dialer.Timeout to Options.Timeout (100ms), and
	// serves from the local fallback until Redis can be reached.
	lim, err := ratelimit.Dial(opt, ratelimit.Options{})
	if err != nil {
		return err
	}
	defer lim.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	inspectLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           shopWith(lim, httplimit.IPOptions{TrustedProxies: proxies}, watcher),
		ReadHeaderTimeout: 5 * time.Second,
	}
	inspectSrv := &http.Server{Handler: inspection(watcher, lim), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(w, "Rules from %s (%s).\nInspection page (loopback only): http://%[3]s/limits/ (the rules in force, any key's state);\n"+
		"which route uses which rule, and the key each one counts a request under: http://%[3]s/\n\n",
		rulesPath, describeRules(watcher.Current()), inspectLn.Addr())
	printTips(w, baseURL(ln.Addr(), addr), limitsKept(lim, where), proxies)

	return untilSignal(srv, ln, inspectSrv, inspectLn)
}

// untilSignal serves the shop (srv on ln) and the inspection page
// (inspectSrv on inspectLn) until SIGINT or SIGTERM, then shuts both down,
// giving requests in flight 5 seconds.
func untilSignal(srv *http.Server, ln net.Listener, inspectSrv *http.Server, inspectLn net.Listener) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		inspectSrv.Shutdown(shutdown)
		srv.Shutdown(shutdown)
	}()
	go inspectSrv.Serve(inspectLn)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// inspection returns the inspection page: the rules in force and any
// key's state under /limits/ (rules.Handler), and at / an index of which
// route uses which rule and the key each request is counted under.
func inspection(watcher *rules.Watcher, lim *ratelimit.Limiter) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/limits/", http.StripPrefix("/limits", rules.Handler(watcher, lim)))
	mux.Handle("GET /{$}", routesIndex())
	return mux
}

// rulesFile returns the rules file to watch: path, or, when path is "",
// a copy of the default rules in a new temporary directory, which it
// prints so that the user can copy it, and which cleanup removes.
func rulesFile(w io.Writer, path string) (string, func(), error) {
	if path != "" {
		return path, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "ratelimit-demo-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, defaultRules, 0o644); err != nil {
		cleanup()
		return "", nil, err
	}
	fmt.Fprintf(w, "No -rules: the default rules below, written to %s (edit it, or copy it and pass -rules).\n\n%s\n", path, defaultRules)
	return path, cleanup, nil
}

// describeRules lists a Set's rules as their limits: "shop:coupon 3 per 1m0s, ...".
func describeRules(s *rules.Set) string {
	var b strings.Builder
	for i, name := range s.Names() {
		r, _ := s.Rule(name)
		if i > 0 {
			b.WriteString(", ")
		}
		if r.Leases() {
			fmt.Fprintf(&b, "%s %d at once (leases of %v)", name, r.Limit.Rate, r.Limit.Window)
		} else {
			fmt.Fprintf(&b, "%s %v", name, r.Limit)
		}
		if r.DryRun {
			b.WriteString(" (dry run)")
		}
	}
	return b.String()
}

// baseURL is the URL to try the server at: localhost unless addr names a
// host.
func baseURL(bound net.Addr, addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	port := "80"
	if t, ok := bound.(*net.TCPAddr); ok {
		port = strconv.Itoa(t.Port)
	}
	return "http://" + net.JoinHostPort(host, port)
}

// limitsKept says where lim keeps its limits as Dial left it (where names
// the server): in Redis once Dial connected, and otherwise that Redis
// cannot be reached yet and each decision is local until it can.
func limitsKept(lim *ratelimit.Limiter, where string) string {
	if lim.Stats().Connected {
		return "limits kept in " + where
	}
	return where + " cannot be reached yet: decisions are local, this process's alone,\n" +
		"until it can (the log says when it connects)"
}

// printTips prints how to try the shop at base; kept says where its limits
// are kept (see limitsKept).
func printTips(w io.Writer, base, kept string, proxies []netip.Prefix) {
	forwarded := "A forged X-Forwarded-For changes nothing: no proxy is trusted (see -trust)"
	if len(proxies) > 0 {
		forwarded = fmt.Sprintf("X-Forwarded-For counts only when the request comes from a proxy in %v;\n"+
			"  # sent from elsewhere, as here unless you are inside those prefixes, it changes nothing", proxies)
	}
	fmt.Fprintf(w, `Shop on %[1]s, %[2]s. Try:

  # Flash sale: 100 orders in any 10s, for everyone together (the 101st gets 429)
  for i in $(seq 101); do curl -s -o /dev/null -w '%%{http_code}\n' -X POST %[1]s/flash-sale/orders; done | sort | uniq -c

  # Coupons: 3 claims a minute per user; keep going to be warned, then banned for 5m
  curl -i -X POST -H '%[3]s: alice' %[1]s/coupons/claim

  # No user: refused with 403, never counted in a bucket all anonymous requests share
  curl -i -X POST %[1]s/coupons/claim

  # Exports: at most 2 running at once per user (the 3rd, while two run, gets 429)
  for i in 1 2 3; do curl -s -o /dev/null -w '%%{http_code}\n' -X POST -H '%[3]s: alice' %[1]s/exports & done; wait

  # Completions of a fake model: 4000 tokens a minute per user; each reserves its
  # max_tokens (256 without one) and gives back what its answer did not use
  curl -i -X POST -H '%[3]s: alice' '%[1]s/complete?max_tokens=800'

  # Merchant pages: 5 a second per client IP (the 6th gets 429)
  for i in $(seq 6); do curl -s -o /dev/null -w '%%{http_code}\n' %[1]s/merchants/42; done

  # %[4]s
  for i in $(seq 6); do curl -s -o /dev/null -w '%%{http_code}\n' -H "X-Forwarded-For: 198.51.100.$i" %[1]s/merchants/42; done

Ctrl-C stops the server.
`, base, kept, userHeader, forwarded)
}
