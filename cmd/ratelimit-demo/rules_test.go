package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/rules"
)

// TestDefaultRules checks that the embedded rules.yaml loads and writes
// the rules the variables hold, and that newShop's routes validate.
func TestDefaultRules(t *testing.T) {
	s, err := rules.Parse(defaultRules)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []ratelimit.Rule{flashSaleRule, couponRule, merchantRule, exportRule, tokensRule} {
		got, ok := s.Rule(want.Name)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("rules.yaml has %+v, want %+v", got, want)
		}
	}
	if !reflect.DeepEqual(s.Names(), []string{"shop:coupon", "shop:export", "shop:flash-sale", "shop:merchant", "shop:tokens"}) {
		t.Errorf("rules.yaml has the rules %q", s.Names())
	}
	if gold, _ := s.For(couponRule.Name, "user:gold"); gold.Limit.Rate != 30 {
		t.Errorf("user:gold's override: %+v", gold)
	}
}

// TestShopReloadsItsRules serves the shop from a watched rules file and
// changes the merchant pages' limit: the next request sees it.
func TestShopReloadsItsRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, defaultRules, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := rules.Watch(path, rules.WatchOptions{Interval: 20 * time.Millisecond, Require: shopRules})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	lim, err := ratelimit.New(nil, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	shop := shopWith(lim, httplimit.IPOptions{}, w)
	if r := shopRequest(shop, "GET", "/merchants/1", "192.0.2.1:1"); r.Header().Get("RateLimit-Policy") != `"shop:merchant";q=5;w=1` {
		t.Fatalf("before: %q", r.Header().Get("RateLimit-Policy"))
	}
	changed := strings.Replace(string(defaultRules), "rate: 5\n    window: 1s", "rate: 50\n    window: 2s", 1)
	if err := os.WriteFile(path+".new", []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.Status().Reloads == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the change was never applied")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := shopRequest(shop, "GET", "/merchants/1", "192.0.2.1:1"); r.Code != http.StatusOK || r.Header().Get("RateLimit-Policy") != `"shop:merchant";q=50;w=2` {
		t.Fatalf("after: %d %q", r.Code, r.Header().Get("RateLimit-Policy"))
	}
}

// TestRulesFile checks -serve's rules file: the path given, or a printed
// copy of the default rules that cleanup removes.
func TestRulesFile(t *testing.T) {
	var out bytes.Buffer
	path, cleanup, err := rulesFile(&out, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(b, defaultRules) || !strings.Contains(out.String(), string(defaultRules)) || !strings.Contains(out.String(), path) {
		t.Fatalf("the default's copy at %s: %v\n%s", path, err, out.String())
	}
	cleanup()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("the copy's directory is left: %v", err)
	}
	if p, _, err := rulesFile(&out, "mine.yaml"); p != "mine.yaml" || err != nil {
		t.Fatalf("rulesFile(mine.yaml) = %q, %v", p, err)
	}
	if err := run(&out, "", "", "", "", "mine.yaml"); err == nil {
		t.Fatal("-rules without -serve was accepted")
	}
	if got := describeRules(builtin); got != "shop:coupon 3 per 1m0s, shop:export 2 at once (leases of 30s), shop:flash-sale 100 per 10s, shop:merchant 5 per 1s, shop:tokens 4000 per 1m0s" {
		t.Fatalf("describeRules: %q", got)
	}
}
