package conformance

import (
	"time"
	_ "time/tzdata" // the DST cases need Europe/Berlin wherever the suite runs

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// at returns when t is, as a step's offset from testkit.Epoch.
func at(t time.Time) time.Duration { return t.Sub(testkit.Epoch()) }

func berlin() *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err) // time/tzdata is linked in
	}
	return loc
}

func gcra(name string, rate int, window time.Duration, burst int) ratelimit.Rule {
	return ratelimit.Rule{Name: name, Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: rate, Window: window, Burst: burst}}
}

func quotaRule(name string, rate int, p ratelimit.Period, loc *time.Location) ratelimit.Rule {
	return ratelimit.Rule{Name: name, Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: rate, Period: p, Location: loc}}
}

func fixed(name string, rate int, window time.Duration) ratelimit.Rule {
	return ratelimit.Rule{Name: name, Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: rate, Window: window}}
}

func withPenalty(r ratelimit.Rule, p *ratelimit.Penalty) ratelimit.Rule { r.Penalty = p; return r }

// midnight is the first midnight (UTC) after testkit.Epoch, a Sunday noon:
// the end of its day and of its week.
var midnight = at(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))

// kindCases are the behaviour cases of the GCRA, calendar quota and fixed
// window kinds: Limit is Burst for GCRA, Remaining the calls that would
// pass now, RetryAfter until the next could, ResetAfter until the bucket is
// full or the period or window ends.
var kindCases = []behaviourCase{
	{
		// w0 is a multiple of 10s since the Unix epoch: windows start there.
		name: "fixed window: Rate per window aligned to the epoch, 2 × Rate across a boundary",
		rule: fixed("fixed", 3, 10*sec),
		steps: []step{
			{at: w0, do: peek, want: ok(3, 3, 0)},
			{at: w0, want: ok(3, 2, 10*sec)},
			{at: w0 + sec, n: 2, want: ok(3, 0, 9*sec)},
			{at: w0 + 9*sec, want: no(3, 0, sec, sec)},
			{at: w0 + 9*sec, do: peek, want: no(3, 0, sec, sec)},
			{at: w0 + 9*sec, do: allowN, n: 4, err: ratelimit.ErrInvalidN},
			// The next window is whole: three more within 1µs of the
			// last three's window, and three more right at its end.
			{at: w0 + 10*sec, n: 3, want: ok(3, 0, 10*sec)},
			{at: w0 + 20*sec - us, want: no(3, 0, us, us)},
			{at: w0 + 30*sec - us, n: 3, want: ok(3, 0, us)},
			{at: w0 + 30*sec, n: 3, want: ok(3, 0, 10*sec)},
			{at: w0 + 30*sec, want: no(3, 0, 10*sec, 10*sec)},
			// A window without events, then a Reset.
			{at: w0 + 45*sec, do: peek, want: ok(3, 3, 0)},
			{at: w0 + 45*sec, want: ok(3, 2, 5*sec)},
			{at: w0 + 46*sec, do: reset},
			{at: w0 + 46*sec, n: 3, want: ok(3, 0, 4*sec)},
		},
	},
	{
		name: "fixed window: a rejection is a violation; bans",
		rule: withPenalty(fixed("fixed-p", 1, 10*sec), &ratelimit.Penalty{BanAfter: 2, BanFor: time.Minute}),
		steps: []step{
			{at: w0, want: ok(1, 0, 10*sec)},
			{at: w0 + sec, want: violated(no(1, 0, 9*sec, 9*sec), 1)},
			{at: w0 + 2*sec, want: banned(violated(no(1, 0, time.Minute, 8*sec), 2), time.Minute)},
			{at: w0 + 30*sec, do: peek, want: banned(violated(no(1, 0, 32*sec, 0), 2), 32*sec)},
			{at: w0 + 62*sec, want: violated(ok(1, 0, 8*sec), 2)},
			{at: w0 + 62*sec, do: reset},
			{at: w0 + 62*sec, do: peek, want: ok(1, 1, 0)},
		},
	},
	{
		name: "gcra: a burst, then one event per emission interval",
		rule: gcra("bucket", 10, sec, 5), // one token every 100ms, five at once
		steps: []step{
			{at: 0, want: ok(5, 4, 100*ms)},
			{at: 0, n: 4, want: ok(5, 0, 500*ms)},
			{at: 0, want: no(5, 0, 100*ms, 500*ms)},
			{at: 100*ms - us, want: no(5, 0, us, 400*ms+us)},
			{at: 100 * ms, want: ok(5, 0, 500*ms)},
			// 2.5 tokens have come back: two calls would pass.
			{at: 350 * ms, do: peek, want: ok(5, 2, 250*ms)},
			{at: 350 * ms, n: 3, want: no(5, 2, 50*ms, 250*ms)},
			{at: 350 * ms, n: 2, want: ok(5, 0, 450*ms)},
			{at: 350 * ms, do: allowN, n: 6, err: ratelimit.ErrInvalidN},
			{at: 2 * sec, want: ok(5, 4, 100*ms)},
		},
	},
	{
		name: "gcra: an emission interval that is no whole µs refills exactly",
		rule: gcra("thirds", 3, sec, 0), // Burst 0 means Rate; T = 333333⅓µs
		steps: []step{
			{at: 0, n: 3, want: ok(3, 0, sec)},
			{at: 0, want: no(3, 0, 333334*us, sec)},
			{at: 333333 * us, want: no(3, 0, us, 666667*us)},
			{at: 333334 * us, want: ok(3, 0, sec)},
			// The next token is due at 666666⅔µs.
			{at: 666666 * us, want: no(3, 0, us, 666668*us)},
			{at: 666667 * us, want: ok(3, 0, sec)},
			{at: 10 * sec, n: 2, want: ok(3, 1, 666667*us)},
		},
	},
	{
		name: "gcra: a rejection is a violation; bans",
		rule: withPenalty(gcra("bucket-p", 1, sec, 2), &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: 10 * sec}),
		steps: []step{
			{at: 0, n: 2, want: ok(2, 0, 2*sec)},
			{at: 0, want: warned(violated(no(2, 0, sec, 2*sec), 1))},
			{at: 500 * ms, do: peek, want: warned(violated(no(2, 0, 500*ms, 1500*ms), 1))},
			{at: 500 * ms, want: banned(violated(no(2, 0, 10*sec, 1500*ms), 2), 10*sec)},
			{at: 5 * sec, want: banned(violated(no(2, 0, 5500*ms, 0), 2), 5500*ms)},
			{at: 10500 * ms, want: violated(ok(2, 1, sec), 2)},
		},
	},
	{
		name: "gcra: reset fills the bucket",
		rule: gcra("bucket-r", 1, time.Minute, 1),
		steps: []step{
			{at: 0, want: ok(1, 0, time.Minute)},
			{at: sec, want: no(1, 0, 59*sec, 59*sec)},
			{at: sec, do: reset},
			{at: sec, do: peek, want: ok(1, 1, 0)},
			{at: sec, want: ok(1, 0, time.Minute)},
		},
	},
	{
		name: "gcra: a clock that goes backwards",
		rule: gcra("bucket-back", 1, sec, 1),
		steps: []step{
			{at: 10 * sec, want: ok(1, 0, sec)},
			// The bucket is full again only at 11s.
			{at: 5 * sec, want: no(1, 0, 6*sec, 6*sec)},
			{at: 11 * sec, want: ok(1, 0, sec)},
		},
	},
	{
		name: "quota: a day ends at midnight",
		rule: quotaRule("daily", 2, ratelimit.Day, nil),
		steps: []step{
			{at: 0, want: ok(2, 1, midnight)},
			{at: sec, do: peek, want: ok(2, 1, midnight-sec)},
			{at: sec, want: ok(2, 0, midnight-sec)},
			{at: 2 * sec, want: no(2, 0, midnight-2*sec, midnight-2*sec)},
			{at: 2 * sec, do: allowN, n: 3, err: ratelimit.ErrInvalidN},
			{at: midnight - us, want: no(2, 0, us, us)},
			{at: midnight, n: 2, want: ok(2, 0, 24*time.Hour)},
			{at: midnight + 25*time.Hour, do: peek, want: ok(2, 2, 0)},
		},
	},
	{
		name: "quota: weeks start on Monday",
		rule: quotaRule("weekly", 1, ratelimit.Week, nil),
		steps: []step{
			{at: 0, want: ok(1, 0, midnight)}, // a Sunday: the week ends at midnight
			{at: midnight - us, want: no(1, 0, us, us)},
			{at: midnight, want: ok(1, 0, 7*24*time.Hour)},
			{at: midnight + 6*24*time.Hour, want: no(1, 0, 24*time.Hour, 24*time.Hour)},
		},
	},
	{
		name: "quota: a month ends on its last day",
		rule: quotaRule("monthly", 1, ratelimit.Month, nil),
		steps: []step{
			{at: at(time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)), want: ok(1, 0, sec)},
			{at: at(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), want: ok(1, 0, 31*24*time.Hour)},
			{at: at(time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)), want: no(1, 0, 24*time.Hour, 24*time.Hour)},
		},
	},
	{
		name: "quota: daylight-saving days of 25 and 23 hours in Berlin",
		rule: quotaRule("berlin", 1, ratelimit.Day, berlin()),
		steps: []step{
			{at: at(time.Date(2026, 10, 25, 0, 0, 0, 0, berlin())), want: ok(1, 0, 25*time.Hour)},
			{at: at(time.Date(2026, 10, 25, 12, 0, 0, 0, berlin())), want: no(1, 0, 12*time.Hour, 12*time.Hour)},
			{at: at(time.Date(2026, 10, 26, 0, 0, 0, 0, berlin())), want: ok(1, 0, 24*time.Hour)},
			{at: at(time.Date(2027, 3, 28, 0, 0, 0, 0, berlin())), want: ok(1, 0, 23*time.Hour)},
			{at: at(time.Date(2027, 3, 28, 1, 59, 0, 0, berlin())), want: no(1, 0, 21*time.Hour+time.Minute, 21*time.Hour+time.Minute)},
			{at: at(time.Date(2027, 3, 28, 3, 0, 0, 0, berlin())), want: no(1, 0, 21*time.Hour, 21*time.Hour)},
		},
	},
	{
		name: "quota: a rejection is a violation; a ban outlasts the period",
		rule: withPenalty(quotaRule("daily-p", 1, ratelimit.Day, nil), &ratelimit.Penalty{BanAfter: 2, BanFor: 24 * time.Hour}),
		steps: []step{
			{at: 0, want: ok(1, 0, midnight)},
			{at: 0, want: violated(no(1, 0, midnight, midnight), 1)},
			{at: sec, want: banned(violated(no(1, 0, 24*time.Hour, midnight-sec), 2), 24*time.Hour)},
			// A new day, still banned; the violations are forgotten after
			// the default hour.
			{at: midnight, want: banned(no(1, 0, 24*time.Hour+sec-midnight, 0), 24*time.Hour+sec-midnight)},
			{at: sec, do: reset},
			{at: sec, want: ok(1, 0, midnight-sec)},
		},
	},
}
