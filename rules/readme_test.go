package rules_test

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/rules"
)

// readmeYAML returns the yaml blocks of README.md's "Rules from a file"
// section.
func readmeYAML(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Rules from a file\n")
	if !ok {
		t.Fatal(`README.md has no "Rules from a file" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "```yaml\n")
		if !ok {
			return blocks
		}
		block, after, _ := strings.Cut(rest, "```")
		blocks, section = append(blocks, block), after
	}
}

// TestREADME reads the rules file README.md shows and checks that it holds
// every rule of README's examples, as the Go code there writes them.
func TestREADME(t *testing.T) {
	berlin := mustLocation(t, "Europe/Berlin")
	blocks := readmeYAML(t)
	if len(blocks) != 1 {
		t.Fatalf("%d yaml blocks in README's section, want 1", len(blocks))
	}
	s, err := rules.Parse([]byte(blocks[0]))
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
		t.Fatalf("README's file has the rules %q, want %d", s.Names(), len(want))
	}
	for _, w := range want {
		if got, ok := s.Rule(w.Name); !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("README's %q: %+v, want %+v", w.Name, got, w)
		}
	}
	gold := want[2]
	gold.Limit.Rate = 30
	if got, _ := s.For("coupon", "user:tenant-gold"); !reflect.DeepEqual(got, gold) {
		t.Errorf("README's override: %+v", got)
	}
}
