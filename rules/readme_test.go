package rules_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/readme"
	"github.com/ratelimit-go/ratelimit/rules"
)

// readmeYAML returns the yaml blocks of README.md and docs/*.md: each is a
// rules file.
func readmeYAML(t *testing.T) []readme.Block {
	t.Helper()
	files, err := readme.Markdown("..")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readme.Block
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("..", file)
		blocks = append(blocks, readme.Fenced(filepath.ToSlash(name), b, "yaml")...)
	}
	return blocks
}

// TestREADME parses every rules file README.md and docs/*.md show, and
// checks that the one of docs/rules-files.md holds every rule of the
// examples, as the Go code there writes them.
func TestREADME(t *testing.T) {
	berlin := mustLocation(t, "Europe/Berlin")
	var examples []readme.Block
	for _, b := range readmeYAML(t) {
		if _, err := rules.Parse([]byte(b.Code)); err != nil {
			t.Errorf("%s:%d: %v", b.File, b.Line, err)
		}
		if b.File == "docs/rules-files.md" {
			examples = append(examples, b)
		}
	}
	if len(examples) != 1 {
		t.Fatalf("%d yaml blocks in docs/rules-files.md, want 1", len(examples))
	}
	s, err := rules.Parse([]byte(examples[0].Code))
	if err != nil {
		t.Fatal(err)
	}
	want := []ratelimit.Rule{
		{Name: "coupon:claim", Limit: ratelimit.PerMinute(3)},
		{Name: "flash-sale", Limit: ratelimit.Limit{Rate: 100, Window: 10 * time.Second}},
		{Name: "coupon", Limit: ratelimit.PerMinute(3)},
		{Name: "merchant", Limit: ratelimit.PerSecond(5)},
		{Name: "login", Limit: ratelimit.PerMinute(5), Penalty: &ratelimit.Penalty{WarnAfter: 3, BanAfter: 5, BanFor: 30 * time.Minute}},
		{Name: "api", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: time.Second, Burst: 20}, Degraded: ratelimit.DegradedDeny},
		{Name: "daily", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1000, Period: ratelimit.Day, Location: berlin}},
		{Name: "search", Limit: ratelimit.PerMinute(5000), Approximate: true, DryRun: true},
	}
	if len(s.Names()) != len(want) {
		t.Fatalf("the examples' file has the rules %q, want %d", s.Names(), len(want))
	}
	for _, w := range want {
		if got, ok := s.Rule(w.Name); !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("the examples' %q: %+v, want %+v", w.Name, got, w)
		}
	}
	gold := want[2]
	gold.Limit.Rate = 30
	if got, _ := s.For("coupon", "user:tenant-gold"); !reflect.DeepEqual(got, gold) {
		t.Errorf("the examples' override: %+v", got)
	}
}
