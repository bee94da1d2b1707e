package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/policy"
)

func TestFormat(t *testing.T) {
	coupon := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
	ladder := ratelimit.Rule{Name: "ladder", Limit: ratelimit.PerMinute(1),
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 3, BanFor: 10 * time.Minute}}
	dry := ratelimit.Rule{Name: "new", Limit: ratelimit.PerSecond(2), DryRun: true}
	dryLadder := ladder
	dryLadder.DryRun = true
	out := func(name string, r ratelimit.Rule, res ratelimit.Result) policy.Outcome {
		return policy.Outcome{Entry: policy.Entry{Name: name, Rule: r, Key: "k"}, Result: res}
	}
	cases := []struct {
		name     string
		outcomes []policy.Outcome
		want     policy.Fields
	}{
		{name: "nothing asked"},
		{
			name: "allowed, window not empty",
			outcomes: []policy.Outcome{out("coupon", coupon, ratelimit.Result{Allowed: true, Limit: 3, Remaining: 2,
				ResetAfter: 59*time.Second + time.Millisecond})},
			want: policy.Fields{Policy: `"coupon";q=3;w=60`, RateLimit: `"coupon";r=2;t=60`},
		},
		{
			name:     "allowed, empty window: no t",
			outcomes: []policy.Outcome{out("coupon", coupon, ratelimit.Result{Allowed: true, Limit: 3, Remaining: 3})},
			want:     policy.Fields{Policy: `"coupon";q=3;w=60`, RateLimit: `"coupon";r=3`},
		},
		{
			name: "denied: t rounds up, and is at least 1",
			outcomes: []policy.Outcome{
				out("a", coupon, ratelimit.Result{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: time.Second}),
				out("b", coupon, ratelimit.Result{Limit: 3, RetryAfter: 0, ResetAfter: time.Second}),
			},
			want: policy.Fields{Policy: `"a";q=3;w=60, "b";q=3;w=60`, RateLimit: `"a";r=1;t=1, "b";r=0;t=1`},
		},
		{
			name: "warned",
			outcomes: []policy.Outcome{out("ladder", ladder, ratelimit.Result{Limit: 1, RetryAfter: 58500 * time.Millisecond,
				Violations: 2, Warned: true})},
			want: policy.Fields{Policy: `"ladder";q=1;w=60`, RateLimit: `"ladder";r=0;t=59`,
				Warning: `"ladder";violations=2;ban-after=3`},
		},
		{
			name: "degraded: the degraded share is the quota",
			outcomes: []policy.Outcome{out("coupon", coupon, ratelimit.Result{Allowed: true, Limit: 1, Remaining: 0,
				ResetAfter: time.Minute, Degraded: true})},
			want: policy.Fields{Policy: `"coupon";q=1;w=60`, RateLimit: `"coupon";r=0;t=60`, Degraded: `"coupon"`},
		},
		{
			name: "dry run with room is not advertised",
			outcomes: []policy.Outcome{
				out("new", dry, ratelimit.Result{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: time.Second}),
				out("coupon", coupon, ratelimit.Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: time.Minute}),
			},
			want: policy.Fields{Policy: `"coupon";q=3;w=60`, RateLimit: `"coupon";r=2;t=60`},
		},
		{
			name: "dry run that would have denied: listed in DryRun only, never as r=0",
			outcomes: []policy.Outcome{
				out("new", dry, ratelimit.Result{Allowed: true, DryRun: true, Limit: 2, Remaining: 0,
					RetryAfter: 300 * time.Millisecond, ResetAfter: time.Second}),
				out("coupon", coupon, ratelimit.Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: time.Minute}),
			},
			want: policy.Fields{Policy: `"coupon";q=3;w=60`, RateLimit: `"coupon";r=2;t=60`, DryRun: `"new";t=1`},
		},
		{
			name: "dry run's ban and warning: flagged in DryRun, no warning",
			outcomes: []policy.Outcome{
				out("ladder", dryLadder, ratelimit.Result{Allowed: true, DryRun: true, Limit: 1,
					RetryAfter: 10 * time.Minute, Violations: 3, Banned: true, BannedFor: 10 * time.Minute}),
				out("other", dryLadder, ratelimit.Result{Allowed: true, DryRun: true, Limit: 1,
					RetryAfter: 30 * time.Second, Violations: 2, Warned: true, Degraded: true}),
			},
			want: policy.Fields{DryRun: `"ladder";t=600;banned, "other";t=30`, Degraded: `"other"`},
		},
		{
			name: "names are sf-strings",
			outcomes: []policy.Outcome{out("50% \"off\" \\ café", coupon, ratelimit.Result{Allowed: true, Limit: 3, Remaining: 2,
				ResetAfter: time.Minute})},
			want: policy.Fields{Policy: `"50%25 \"off\" \\ caf%C3%A9";q=3;w=60`, RateLimit: `"50%25 \"off\" \\ caf%C3%A9";r=2;t=60`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := policy.Format(c.outcomes); got != c.want {
				t.Errorf("Format:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	cases := []struct{ in, want string }{
		{"coupon", "coupon"},
		{"", ""},
		{"50%", "50%25"},
		{`a"b\c`, `a"b\c`}, // printable ASCII: escaped only inside the quotes
		{"ünïcode\x00\n\x7f", "%C3%BCn%C3%AFcode%00%0A%7F"},
		{"\xff", "%FF"},
	}
	for _, c := range cases {
		if got := policy.Encode(c.in); got != c.want {
			t.Errorf("Encode(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestEncodeIsTheFieldsName checks that a client reading a policy's name
// from the fields, with any Structured Field parser, gets Encode(name).
func TestEncodeIsTheFieldsName(t *testing.T) {
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerSecond(1)}
	for _, name := range []string{"coupon", "50%", `a"b\c`, "ünï\x00", "\xff\xfe", `%22`, "日本"} {
		fs := policy.Format([]policy.Outcome{{Entry: policy.Entry{Name: name, Rule: rule}, Result: ratelimit.Result{Allowed: true, Limit: 1}}})
		item, _, _ := strings.Cut(fs.RateLimit, ";")
		if got, want := parseString(t, item), policy.Encode(name); got != want {
			t.Errorf("name %q: the field %s carries %q, Encode says %q", name, item, got, want)
		}
	}
}

// parseString parses an sf-string (RFC 8941, 4.2.5).
func parseString(t *testing.T, s string) string {
	t.Helper()
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		t.Fatalf("not an sf-string: %s", s)
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		c := s[i]
		if c == '\\' {
			i++
			if c = s[i]; c != '"' && c != '\\' {
				t.Fatalf("bad escape in %s", s)
			}
		} else if c == '"' || c < 0x20 || c > 0x7e {
			t.Fatalf("byte %#x not allowed in %s", c, s)
		}
		b.WriteByte(c)
	}
	return b.String()
}

func TestSeconds(t *testing.T) {
	cases := []struct {
		name string
		res  ratelimit.Result
		want int64
	}{
		{"allowed, empty window", ratelimit.Result{Allowed: true}, 0},
		{"allowed, rounds up", ratelimit.Result{Allowed: true, ResetAfter: time.Second + time.Nanosecond}, 2},
		{"allowed, whole seconds", ratelimit.Result{Allowed: true, ResetAfter: time.Minute}, 60},
		{"denied, at least 1", ratelimit.Result{RetryAfter: 0, ResetAfter: time.Minute}, 1},
		{"denied, rounds up", ratelimit.Result{RetryAfter: 56500 * time.Millisecond, ResetAfter: time.Minute}, 57},
		{"dry run: what the denial would have said", ratelimit.Result{Allowed: true, DryRun: true, RetryAfter: time.Millisecond, ResetAfter: time.Minute}, 1},
	}
	for _, c := range cases {
		o := policy.Outcome{Result: c.res}
		if got := o.Seconds(); got != c.want {
			t.Errorf("%s: Seconds() = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestDenial(t *testing.T) {
	allowed := policy.Outcome{Entry: policy.Entry{Name: "a"}, Result: ratelimit.Result{Allowed: true}}
	denied := policy.Outcome{Entry: policy.Entry{Name: "d"}}
	cases := []struct {
		name     string
		outcomes []policy.Outcome
		want     string // the denial's name, "" for none
	}{
		{"none", nil, ""},
		{"allowed", []policy.Outcome{allowed, allowed}, ""},
		{"denied last", []policy.Outcome{allowed, denied}, "d"},
	}
	for _, c := range cases {
		d, ok := policy.Denial(c.outcomes)
		if got := ""; ok {
			got = d.Name
			if got != c.want {
				t.Errorf("%s: Denial = %q, want %q", c.name, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%s: no denial, want %q", c.name, c.want)
		}
	}
}
