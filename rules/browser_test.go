//go:build unix

package rules_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chromium returns the path of a Chromium to run headless, or skips the
// test with how to install one; with RATELIMIT_REQUIRE_BROWSER=1 (as
// .ci/run sets it) a missing browser fails the test instead.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	const hint = "no chromium: install it with `apt-get install chromium` to test the inspection page in a browser"
	if os.Getenv("RATELIMIT_REQUIRE_BROWSER") == "1" {
		t.Fatal(hint + " (RATELIMIT_REQUIRE_BROWSER=1)")
	}
	t.Skip(hint)
	return ""
}

// dumpDOM loads url in a headless Chromium and returns the DOM it built.
func dumpDOM(t *testing.T, browser, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	// Chromium starts helper processes: put them in a group of their own,
	// and end that group, and only it, when the browser is done.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind, if any
	}
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// TestInspectInABrowser loads the inspection page in a real headless
// browser: it shows the rules, escaped, a key never seen as one with no
// state, a banned key's time rounded, that the Limiter has no Redis, and a
// new rule after a reload.
func TestInspectInABrowser(t *testing.T) {
	browser := chromium(t)
	in := newInspection(t, 20*time.Millisecond)
	coupon, _ := in.w.For("shop:coupon", "user:alice")
	for range 5 { // two violations ban alice for 5m
		in.lim.Allow(context.Background(), coupon, "user:alice")
	}
	in.clk.Advance(12*time.Second + 360955*time.Microsecond)
	if dom := dumpDOM(t, browser, in.srv.URL+"/limits/?rule=shop:coupon&key=user:alice"); !strings.Contains(dom, "yes, for 4m48s") ||
		strings.Contains(dom, "no state") {
		t.Errorf("the page in the browser does not show alice banned for 4m48s:\n%s", dom)
	}
	url := in.srv.URL + "/limits/?rule=shop:coupon&key=user:gold"
	dom := dumpDOM(t, browser, url)
	for _, want := range []string{"<h1>Rate limit rules</h1>", "<code>shop:coupon</code>", "&lt;script&gt;alert('x')&lt;/script&gt;",
		"30 of 30", "(the key's override)", "no state: never seen, or expired; check the key",
		"</span>: every decision is local"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page in the browser lacks %q:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, "shop:new") {
		t.Fatal("a rule before it was written")
	}
	if err := os.WriteFile(in.path, []byte(inspected+"  - name: shop:new\n    rate: 1\n    window: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return in.w.Status().Reloads == 1 })
	dom = dumpDOM(t, browser, url)
	if !strings.Contains(dom, "<code>shop:new</code>") || !strings.Contains(dom, "reloads applied since start: 1") {
		t.Fatalf("the page in the browser does not show the new rule:\n%s", dom)
	}
}
