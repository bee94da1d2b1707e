package rules_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/rules"
)

// mustLocation loads a time zone or fails the test.
func mustLocation(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no time zone %s on this machine: %v", name, err)
	}
	return loc
}

// TestParseFields reads every field of every kind and checks the rule it
// becomes, field by field.
func TestParseFields(t *testing.T) {
	berlin := mustLocation(t, "Europe/Berlin")
	cases := []struct {
		name string
		yaml string
		want ratelimit.Rule
	}{
		{"sliding log by default", `
rules:
  - name: shop:coupon
    rate: 3
    window: 1m
`, ratelimit.Rule{Name: "shop:coupon", Limit: ratelimit.PerMinute(3)}},
		{"sliding log, every field", `
rules:
  - name: shop:coupon
    kind: sliding-log
    rate: 3
    window: 1m
    dry_run: true
    degraded: deny
    prefetch: 20ms
    penalty:
      warn_after: 2
      ban_after: 4
      ban_for: 5m
      memory: 2h
      ban_growth: 1.5
      max_ban_for: 48h
`, ratelimit.Rule{Name: "shop:coupon", Limit: ratelimit.PerMinute(3), DryRun: true, Degraded: ratelimit.DegradedDeny, Prefetch: 20 * time.Millisecond,
			Penalty: &ratelimit.Penalty{WarnAfter: 2, BanAfter: 4, BanFor: 5 * time.Minute, Memory: 2 * time.Hour,
				BanGrowth: 1.5, MaxBanFor: 48 * time.Hour}}},
		{"approximate", `
rules:
  - name: search
    kind: approximate
    rate: 5000
    window: 1m
    degraded: allow
`, ratelimit.Rule{Name: "search", Limit: ratelimit.PerMinute(5000), Approximate: true, Degraded: ratelimit.DegradedAllow}},
		{"gcra with a burst", `
rules:
  - name: api
    kind: gcra
    rate: 10
    window: 1s
    burst: 20
    degraded: local
`, ratelimit.Rule{Name: "api", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: time.Second, Burst: 20},
			Degraded: ratelimit.DegradedLocal}},
		{"gcra with Prefetch", `
rules:
  - name: api
    kind: gcra
    rate: 5000
    window: 1s
    prefetch: 20ms
`, ratelimit.Rule{Name: "api", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 5000, Window: time.Second}, Prefetch: 20 * time.Millisecond}},
		{"calendar quota with Prefetch", `
rules:
  - name: daily
    kind: calendar-quota
    rate: 100000
    period: day
    prefetch: 500ms
`, ratelimit.Rule{Name: "daily", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 100000, Period: ratelimit.Day}, Prefetch: 500 * time.Millisecond}},
		{"gcra, durations below a second", `
rules:
  - name: api
    kind: gcra
    rate: 1
    window: 500ms
`, ratelimit.Rule{Name: "api", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: 500 * time.Millisecond}}},
		{"fixed window", `
rules:
  - name: api
    kind: fixed-window
    rate: 100
    window: 1m
`, ratelimit.Rule{Name: "api", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 100, Window: time.Minute}}},
		{"calendar quota, a day in Berlin", `
rules:
  - name: daily
    kind: calendar-quota
    rate: 1000
    period: day
    location: Europe/Berlin
`, ratelimit.Rule{Name: "daily", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1000, Period: ratelimit.Day, Location: berlin}}},
		{"calendar quota, a week in UTC", `
rules:
  - name: weekly
    kind: calendar-quota
    rate: 7
    period: week
`, ratelimit.Rule{Name: "weekly", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 7, Period: ratelimit.Week}}},
		{"calendar quota, a month", `
rules:
  - name: monthly
    kind: calendar-quota
    rate: 30000
    period: month
    location: UTC
`, ratelimit.Rule{Name: "monthly", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 30000, Period: ratelimit.Month, Location: time.UTC}}},
		{"any bytes in a name, quoted", `
rules:
  - name: "50% off: café"
    rate: 1
    window: 24h
    dry_run: false
`, ratelimit.Rule{Name: "50% off: café", Limit: ratelimit.Limit{Rate: 1, Window: 24 * time.Hour}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := rules.Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := s.Rule(c.want.Name)
			if !ok {
				t.Fatalf("no rule %q in %v", c.want.Name, s.Names())
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v (penalty %+v)\nwant %+v (penalty %+v)", got, got.Penalty, c.want, c.want.Penalty)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
			if names := s.Names(); len(names) != 1 || names[0] != c.want.Name {
				t.Fatalf("Names() = %q", names)
			}
		})
	}
}

// TestParseErrors feeds every mistake the format refuses and checks the
// line and the rule each error names, and what it wraps.
func TestParseErrors(t *testing.T) {
	const head = "rules:\n  - name: r\n"
	cases := []struct {
		name string
		yaml string
		want string // the whole message, position first
		rule bool   // the library rejected the rule: wraps ratelimit.ErrInvalidRule
	}{
		{"empty file", "", "rules: the file is empty: it has no rules", false},
		{"only a comment", "# nothing yet\n", "the file is empty: it has no rules", false},
		{"no rules field", "limits: []\n", `line 1: the file: unknown field "limits" (fields: rules)`, false},
		{"rules: []", "rules: []\n", "line 1: rules: want a list of at least one rule, got an empty list", false},
		{"rules: nothing", "rules:\n", "line 1: rules: want a list of at least one rule, got nothing", false},
		{"rules: a mapping", "rules:\n  name: r\n", "line 1: rules: want a list of at least one rule, got a mapping", false},
		{"not YAML", "rules: [\n", "yaml: line 1: did not find expected node content", false},
		{"two documents", "rules:\n  - {name: a, rate: 1, window: 1s}\n---\nrules: []\n", "line 3: a second YAML document: a rules file holds one", false},
		{"a rule is not a mapping", "rules:\n  - r\n", `line 2: rule 1: want a mapping of fields, got "r"`, false},
		{"no name", "rules:\n  - rate: 1\n    window: 1s\n", "line 2: rule 1: name is required", false},
		{"empty name", "rules:\n  - name: \"\"\n    rate: 1\n", `line 2: rule 1: name: must not be empty`, false},
		{"unknown field, named rule", head + "    rate: 1\n    windw: 1s\n", `line 4: rule "r": unknown field "windw" (fields: name, kind, rate, window, burst, period, location, dry_run, degraded, penalty, prefetch, overrides)`, false},
		{"field twice", head + "    rate: 1\n    rate: 2\n    window: 1s\n", `line 4: rule "r": field "rate" appears twice (first at line 3)`, false},
		{"duplicate rule name", head + "    rate: 1\n    window: 1s\n  - name: q\n    rate: 1\n    window: 1s\n  - name: r\n    rate: 2\n    window: 1s\n",
			`line 8: rule "r": name "r" is taken by the rule at line 2`, false},
		{"no rate", head + "    window: 1s\n", `line 2: rule "r": rate is required`, false},
		{"rate not a number", head + "    rate: three\n    window: 1s\n", `line 3: rule "r": rate: want a whole number, got "three"`, false},
		{"rate a fraction", head + "    rate: 2.5\n    window: 1s\n", `line 3: rule "r": rate: want a whole number, got "2.5"`, false},
		{"rate quoted", head + "    rate: \"3\"\n    window: 1s\n", `line 3: rule "r": rate: want a whole number, got "3"`, false},
		{"rate 0: the library refuses", head + "    rate: 0\n    window: 1s\n", `line 2: ratelimit: invalid rule: rule "r": Rate 0 is below 1`, true},
		{"no window", head + "    rate: 1\n", `line 2: rule "r": window is required for kind sliding-log`, false},
		{"bad duration", head + "    rate: 1\n    window: 1x\n", `line 4: rule "r": window: "1x" is not a duration (a Go duration with its unit: 500ms, 1m, 24h)`, false},
		{"duration without a unit", head + "    rate: 1\n    window: 60\n", `line 4: rule "r": window: "60" is not a duration`, false},
		{"window a list", head + "    rate: 1\n    window: [1s]\n", `line 4: rule "r": window: want a value, got a list`, false},
		{"negative window: the library refuses", head + "    rate: 1\n    window: -1s\n", `line 2: ratelimit: invalid rule: rule "r": Window -1s is shorter than 1µs`, true},
		{"unknown kind", head + "    kind: leaky-bucket\n    rate: 1\n    window: 1s\n", `line 3: rule "r": kind "leaky-bucket" is unknown (one of approximate, calendar-quota, concurrency, fixed-window, gcra, sliding-log)`, false},
		{"concurrency with a TTL under 100ms: the library refuses", head + "    kind: concurrency\n    rate: 1\n    window: 50ms\n", `line 2: ratelimit: invalid rule: rule "r": Window 50ms, a lease's TTL, is shorter than 100ms`, true},
		{"prefetch on concurrency: the library refuses", head + "    kind: concurrency\n    rate: 1\n    window: 1s\n    prefetch: 20ms\n", `line 2: ratelimit: invalid rule: rule "r": Prefetch is not for a concurrency rule`, true},
		{"burst on concurrency", head + "    kind: concurrency\n    rate: 1\n    window: 1s\n    burst: 2\n", `line 6: rule "r": burst is not a field of kind concurrency`, false},
		{"burst on a sliding log", head + "    rate: 1\n    window: 1s\n    burst: 2\n", `line 5: rule "r": burst is not a field of kind sliding-log`, false},
		{"burst on an approximate rule", head + "    kind: approximate\n    rate: 1\n    window: 1s\n    burst: 2\n", `line 6: rule "r": burst is not a field of kind approximate`, false},
		{"burst on a fixed window", head + "    kind: fixed-window\n    rate: 1\n    window: 1s\n    burst: 2\n", `line 6: rule "r": burst is not a field of kind fixed-window`, false},
		{"fixed window without a window", head + "    kind: fixed-window\n    rate: 1\n", `line 2: rule "r": window is required for kind fixed-window`, false},
		{"period on gcra", head + "    kind: gcra\n    rate: 1\n    window: 1s\n    period: day\n", `line 6: rule "r": period is not a field of kind gcra`, false},
		{"location on a sliding log", head + "    rate: 1\n    window: 1s\n    location: UTC\n", `line 5: rule "r": location is not a field of kind sliding-log`, false},
		{"window on a quota", head + "    kind: calendar-quota\n    rate: 1\n    period: day\n    window: 24h\n", `line 6: rule "r": window is not a field of kind calendar-quota`, false},
		{"quota without a period", head + "    kind: calendar-quota\n    rate: 1\n", `line 2: rule "r": period is required for kind calendar-quota`, false},
		{"unknown period", head + "    kind: calendar-quota\n    rate: 1\n    period: fortnight\n", `line 5: rule "r": period: "fortnight" is none of day, month, week`, false},
		{"unknown time zone", head + "    kind: calendar-quota\n    rate: 1\n    period: day\n    location: Mars/Olympus\n", `line 6: rule "r": location: "Mars/Olympus" is not a time zone this program knows`, false},
		{"gcra bucket too large: the library refuses", head + "    kind: gcra\n    rate: 3\n    window: 8760h\n    burst: 2147483647\n", `line 2: ratelimit: invalid rule: rule "r": a bucket of Burst 2147483647`, true},
		{"dry_run not a boolean", head + "    rate: 1\n    window: 1s\n    dry_run: sometimes\n", `line 5: rule "r": dry_run: want true or false, got "sometimes"`, false},
		{"unknown degraded policy", head + "    rate: 1\n    window: 1s\n    degraded: open\n", `line 5: rule "r": degraded: "open" is none of allow, deny, local`, false},
		{"penalty: nothing", head + "    rate: 1\n    window: 1s\n    penalty:\n", `line 5: rule "r": penalty: want a mapping of fields, got nothing`, false},
		{"penalty: unknown field", head + "    rate: 1\n    window: 1s\n    penalty:\n      ban_after: 2\n      ban_four: 1m\n", `line 7: rule "r": penalty: unknown field "ban_four" (fields: warn_after, ban_after, ban_for, memory, ban_growth, max_ban_for)`, false},
		{"penalty: bad duration", head + "    rate: 1\n    window: 1s\n    penalty:\n      ban_after: 2\n      ban_for: forever\n", `line 7: rule "r": penalty: ban_for: "forever" is not a duration`, false},
		{"penalty: ban_growth not a number", head + "    rate: 1\n    window: 1s\n    penalty:\n      ban_after: 2\n      ban_for: 1m\n      ban_growth: double\n", `line 8: rule "r": penalty: ban_growth: want a number, got "double"`, false},
		{"penalty: warn_after not a number", head + "    rate: 1\n    window: 1s\n    penalty:\n      warn_after: x\n", `line 6: rule "r": penalty: warn_after: want a whole number, got "x"`, false},
		{"penalty: memory, max_ban_for bad", head + "    rate: 1\n    window: 1s\n    penalty:\n      memory: 1\n", `line 6: rule "r": penalty: memory: "1" is not a duration`, false},
		{"penalty: max_ban_for bad", head + "    rate: 1\n    window: 1s\n    penalty:\n      max_ban_for: y\n", `line 6: rule "r": penalty: max_ban_for: "y" is not a duration`, false},
		{"penalty: ban_after missing: the library refuses", head + "    rate: 1\n    window: 1s\n    penalty:\n      ban_for: 1m\n", `line 2: ratelimit: invalid rule: rule "r": `, true},
		{"penalty: warn_after not below ban_after: the library refuses", head + "    rate: 1\n    window: 1s\n    penalty:\n      warn_after: 3\n      ban_after: 3\n      ban_for: 1m\n", `line 2: ratelimit: invalid rule: rule "r": `, true},
		{"an alias", "base: &b 1s\nrules:\n  - name: r\n    rate: 1\n    window: *b\n", `line 1: the file: unknown field "base"`, false},
		{"an alias in a rule", "rules:\n  - name: r\n    rate: &n 1\n    window: 1s\n  - name: q\n    rate: *n\n    window: 1s\n", `line 6: rule "q": rate: aliases are not supported`, false},
		{"overrides: not a list", head + "    rate: 1\n    window: 1s\n    overrides:\n      key: gold\n", `line 5: rule "r": overrides: want a list, got a mapping`, false},
		{"override without a key", head + "    rate: 1\n    window: 1s\n    overrides:\n      - rate: 2\n", `line 6: rule "r": override: key is required`, false},
		{"override key twice", head + "    rate: 1\n    window: 1s\n    overrides:\n      - key: gold\n        rate: 2\n      - key: gold\n        rate: 3\n", `line 8: rule "r": override: key "gold" appears twice (first at line 6)`, false},
		{"override: unknown field", head + "    rate: 1\n    window: 1s\n    overrides:\n      - key: gold\n        dry_run: true\n", `line 7: rule "r": override: unknown field "dry_run" (fields: key, rate, window, burst)`, false},
		{"override changes nothing", head + "    rate: 1\n    window: 1s\n    overrides:\n      - key: gold\n", `line 6: rule "r": override "gold": the override changes nothing: give it a rate, a window or a burst`, false},
		{"override: burst on a sliding log", head + "    rate: 1\n    window: 1s\n    overrides:\n      - key: gold\n        burst: 3\n", `line 7: rule "r": override "gold": burst is not a field of kind sliding-log`, false},
		{"override: window on a quota", head + "    kind: calendar-quota\n    rate: 1\n    period: day\n    overrides:\n      - key: gold\n        window: 1s\n", `line 8: rule "r": override "gold": window is not a field of kind calendar-quota`, false},
		{"override: bad rate", head + "    rate: 1\n    window: 1s\n    overrides:\n      - key: gold\n        rate: lots\n", `line 7: rule "r": override "gold": rate: want a whole number, got "lots"`, false},
		{"override: bad window", head + "    rate: 1\n    window: 1s\n    overrides:\n      - key: gold\n        window: 2\n", `line 7: rule "r": override "gold": window: "2" is not a duration`, false},
		{"override: rate 0: the library refuses", head + "    rate: 1\n    window: 1s\n    overrides:\n      - key: gold\n        rate: 0\n", `line 6: override "gold": ratelimit: invalid rule: rule "r": Rate 0 is below 1`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := rules.Parse([]byte(c.yaml))
			if err == nil {
				t.Fatalf("accepted: %v", s.Names())
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n  %v\ndoes not say\n  %s", err, c.want)
			}
			if !errors.Is(err, rules.ErrInvalid) {
				t.Fatalf("%v does not wrap rules.ErrInvalid", err)
			}
			if got := errors.Is(err, ratelimit.ErrInvalidRule); got != c.rule {
				t.Fatalf("errors.Is(%v, ratelimit.ErrInvalidRule) = %v", err, got)
			}
		})
	}
}

// TestLoadNamesTheFile checks that Load's errors start with the file and
// the line, and that a missing file's error wraps fs.ErrNotExist.
func TestLoadNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  - name: r\n    rate: 1\n    window: 1x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := rules.Load(path)
	if want := path + `:4: rule "r": window: "1x" is not a duration`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want it to start with %s", err, want)
	}
	_, err = rules.Load(filepath.Join(dir, "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("rules:\n  - name: r\n    rate: 1\n    window: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := rules.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := s.Rule("r"); !ok || r.Limit != ratelimit.PerSecond(1) {
		t.Fatalf("Rule(r) = %+v, %v", r, ok)
	}
}

// TestFor checks overrides: a key with one gets its limit, under the
// rule's own name; every other key gets the rule as written.
func TestFor(t *testing.T) {
	s, err := rules.Parse([]byte(`
rules:
  - name: shop:coupon
    rate: 3
    window: 1m
    penalty:
      ban_after: 4
      ban_for: 5m
    overrides:
      - key: tenant-gold
        rate: 30
      - key: tenant-slow
        window: 1h
  - name: api
    kind: gcra
    rate: 10
    window: 1s
    overrides:
      - key: batch
        burst: 100
        rate: 20
        window: 2s
  - name: daily
    kind: calendar-quota
    rate: 1000
    period: day
    overrides:
      - key: "42"
        rate: 5000
`))
	if err != nil {
		t.Fatal(err)
	}
	coupon, _ := s.Rule("shop:coupon")
	gold, slow, api, daily := coupon, coupon, ratelimit.Rule{Name: "api", Kind: ratelimit.GCRA, Limit: ratelimit.PerSecond(10)}, ratelimit.Rule{}
	gold.Limit.Rate = 30
	slow.Limit.Window = time.Hour
	batch := api
	batch.Limit = ratelimit.Limit{Rate: 20, Window: 2 * time.Second, Burst: 100}
	daily = ratelimit.Rule{Name: "daily", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1000, Period: ratelimit.Day}}
	daily42 := daily
	daily42.Limit.Rate = 5000
	cases := []struct {
		name, key string
		want      ratelimit.Rule
		ok        bool
	}{
		{"shop:coupon", "alice", coupon, true},
		{"shop:coupon", "tenant-gold", gold, true},
		{"shop:coupon", "tenant-slow", slow, true},
		{"shop:coupon", "", coupon, true},
		{"api", "alice", api, true},
		{"api", "batch", batch, true},
		{"daily", "42", daily42, true},
		{"daily", "43", daily, true},
		{"nope", "tenant-gold", ratelimit.Rule{}, false},
	}
	for _, c := range cases {
		got, ok := s.For(c.name, c.key)
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("For(%q, %q) = %+v, %v; want %+v, %v", c.name, c.key, got, ok, c.want, c.ok)
		}
	}
	if gold.Penalty != coupon.Penalty || gold.Name != "shop:coupon" {
		t.Fatal("an override must keep the rule's name and penalty")
	}
	if got := s.Names(); !reflect.DeepEqual(got, []string{"api", "daily", "shop:coupon"}) {
		t.Fatalf("Names() = %q", got)
	}
	var none *rules.Set
	if _, ok := none.For("api", "k"); ok || none.Names() != nil {
		t.Fatal("a nil Set has no rules")
	}
}
