// Command ratelimit-demo shows package ratelimit at work.
//
// With no flags it needs nothing installed: it starts an embedded
// miniredis and plays a story, printed as tables: a user who claims
// coupons too fast is rejected, warned and banned; Redis goes down and the
// limiter keeps deciding from its local fallback; Redis comes back and
// decisions return to it. A fake clock makes the output the same on every
// run.
//
//	go run ./cmd/ratelimit-demo
//	go run ./cmd/ratelimit-demo -redis localhost:6379   # the story on a real Redis
//	go run ./cmd/ratelimit-demo -serve :8080            # a shop's routes over HTTP
//	go run ./cmd/ratelimit-demo -serve :8080 -rules rules.yaml  # their limits from a file
//
// -redis (or the REDIS_URL environment variable, e.g.
// redis://localhost:6379/0) uses a single Redis server instead of the
// embedded one, and plays the whole story there without stopping it: the
// limiter reaches the server through a TCP proxy of the demo's, and the
// outage of act 2 is the demo cutting that proxy (the server keeps running
// and serving its other clients); act 3 mends it. A Sentinel URL cannot go
// through the proxy: then the demo plays act 1 only, and says so. -serve starts an HTTP server whose
// routes are limited with package httplimit as a shop would limit them: a
// flash sale for everyone at once, coupon claims per user, merchant pages
// per client IP, and a fake language model's completions in tokens per
// user, each reserving its max_tokens and settling the tokens its answer
// used. Their limits come from a rules file (-rules, or a copy of
// the default rules.yaml), reloaded while the server runs, and a read-only
// page on loopback shows the rules in force and any key's state, and which
// route uses which rule and the key each request is counted under.
//
// The demo is a module of its own, so that the library's core never
// requires the rules module; go.work at the repository's root lets
// `go run ./cmd/ratelimit-demo` run from there.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

func main() {
	redisAddr := flag.String("redis", "", "use the Redis server at `host:port` (default: $REDIS_URL, else an embedded miniredis)")
	serveAddr := flag.String("serve", "", "serve the shop's routes on `addr` (e.g. :8080) instead of playing the story")
	trust := flag.String("trust", "", "comma-separated `prefixes` of trusted reverse proxies, for the per-IP route (e.g. 10.0.0.0/8)")
	rulesPath := flag.String("rules", "", "with -serve, read the routes' limits from the rules `file` and reload it when it changes (default: a copy of the built-in rules)")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, *redisAddr, os.Getenv("REDIS_URL"), *serveAddr, *trust, *rulesPath); err != nil {
		fmt.Fprintln(os.Stderr, "ratelimit-demo:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, redisAddr, redisURL, serveAddr, trust, rulesPath string) error {
	opt, where, err := clientOption(redisAddr, redisURL)
	if err != nil {
		return err
	}
	var mr *miniredis.Miniredis
	if len(opt.InitAddress) == 0 {
		if mr, err = embedded(&opt); err != nil {
			return err
		}
		defer mr.Close()
	}
	opt.DisableCache = true // the limiter reads nothing through the cache; miniredis has none
	if rulesPath != "" && serveAddr == "" {
		return errors.New("-rules goes with -serve: the story's rules are its own")
	}
	if serveAddr != "" {
		proxies, err := parsePrefixes(trust)
		if err != nil {
			return err
		}
		return serve(w, opt, where, serveAddr, rulesPath, proxies)
	}
	var out *outage
	switch {
	case mr != nil:
		o := stopMiniredis(mr)
		out = &o
	case len(opt.InitAddress) == 1 && opt.Sentinel.MasterSet == "":
		p, err := throughProxy(&opt)
		if err != nil {
			return fmt.Errorf("connecting to %s: %w", where, err)
		}
		defer p.Close()
		o := cutProxy(p)
		out = &o
		where += ", through a proxy of the demo's that acts 2 and 3 cut and mend (your server keeps running)"
	}
	opt.Dialer.Timeout = storyTimeout // a reconnection cannot hold calls up longer than one call may take
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", where, err)
	}
	defer client.Close()
	fmt.Fprintf(w, "Limits kept in %s; a fake clock makes every run print the same story.\n", where)
	return story(w, client, out)
}

// embedded starts the embedded miniredis and points opt at it.
func embedded(opt *rueidis.ClientOption) (*miniredis.Miniredis, error) {
	mr, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	opt.InitAddress = []string{mr.Addr()}
	opt.ForceSingleClient = true
	// One connection, not rueidis' default of several picked at random
	// per call: after the outage every idle connection would fail its
	// first call, and which call that is would change from run to run.
	opt.PipelineMultiplex = -1
	return mr, nil
}

// throughProxy starts a proxy of the demo's to the one server of opt, and
// points opt at it: your server is never stopped, the outage of acts 2
// and 3 cuts the proxy.
func throughProxy(opt *rueidis.ClientOption) (*proxy, error) {
	p, err := newProxy(opt.InitAddress[0])
	if err != nil {
		return nil, err
	}
	if opt.TLSConfig != nil && opt.TLSConfig.ServerName == "" {
		host, _, _ := net.SplitHostPort(opt.InitAddress[0])
		opt.TLSConfig = opt.TLSConfig.Clone()
		opt.TLSConfig.ServerName = host // the certificate names the server, not the proxy
	}
	opt.InitAddress = []string{p.addr}
	opt.ForceSingleClient = true
	opt.PipelineMultiplex = -1 // as for miniredis (see embedded)
	return p, nil
}

// clientOption returns the client options for -redis or REDIS_URL (none:
// the embedded miniredis) and a description of the server.
func clientOption(addr, url string) (rueidis.ClientOption, string, error) {
	switch {
	case addr != "":
		return rueidis.ClientOption{InitAddress: []string{addr}}, "Redis at " + addr, nil
	case url != "":
		opt, err := rueidis.ParseURL(url)
		if err != nil {
			return opt, "", fmt.Errorf("REDIS_URL: %w", err)
		}
		return opt, "Redis at " + strings.Join(opt.InitAddress, ","), nil
	}
	return rueidis.ClientOption{}, "embedded miniredis", nil
}

func parsePrefixes(s string) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			if a, aerr := netip.ParseAddr(f); aerr == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			} else {
				return nil, fmt.Errorf("-trust: %w", err)
			}
		}
		ps = append(ps, p)
	}
	return ps, nil
}
