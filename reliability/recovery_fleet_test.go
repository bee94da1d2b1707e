package reliability_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// TestRecoveryFleetWindows: four Limiters (four instances of a service,
// each with its own client) on one redis-server, 64 callers that pause 1ms
// between calls, over three exact logs, while Redis refuses every command (NOPERM: it
// keeps its data) or is killed and restarted (it loses it) at random
// phases (the seed is logged). Issue #27: once Redis was back, each
// instance decided on Redis before the others' outage decisions were
// written back, and a window admitted up to Rate + 33.
//
// The containment criterion over the whole fleet, each window against the
// bound that applies to it (docs/fallback.md, "A fleet across a recovery"):
//   - a window that holds an outage's start, where each instance knows only
//     its own events: Σ max(ownᵢ, shareᵢ), ownᵢ the events instance i
//     allowed in the window before the start (here, every call that may
//     have been decided then), shareᵢ = ceil(Rate / 4); the start is
//     somewhere between the test's asking for the fault and the fault's
//     being in effect, so a window that may hold it counts as one that
//     does;
//   - every other window, inside an outage, across a recovery or on a
//     healthy Redis: the shares together, 4 × ceil(Rate / 4) = Rate + 3 at
//     most.
//
// Liveness: from one Window after the last recovery on (every instance has
// written back by then) the fleet admits at least 0.9 × Rate in every
// interval of 1.2 Windows (see checkLiveAfter).
func TestRecoveryFleetWindows(t *testing.T) {
	rules := recoveryRules()[:3]
	opts := recoveryOptions()
	opts.HeartbeatInterval = time.Second
	const instances = 4
	longest := rules[len(rules)-1].Limit.Window
	calls, faults, _ := runRecovery(t, recoveryRun{rules: rules, callers: 64, limiters: instances, opts: opts,
		faults: []string{"noperm", "kill", "noperm", "kill"},
		// An outage starts more than a window after the last one did, so
		// that a window holds at most one start.
		down: [2]time.Duration{300 * time.Millisecond, 1200 * time.Millisecond},
		up:   [2]time.Duration{longest + 300*time.Millisecond, longest + 1500*time.Millisecond},
		tail: 3 * longest,
		// Callers that pause, as request handlers do: a closed loop
		// answered in-process starves the goroutines that read Redis'
		// replies and send the heartbeats, and measures the scheduler.
		pause: time.Millisecond})
	checkCalls(t, calls)
	last := faults[len(faults)-1].end
	for i, r := range rules {
		var mine []spanCall
		for _, c := range calls {
			if c.rule == i && c.n > 0 {
				mine = append(mine, c)
			}
		}
		slices.SortFunc(mine, func(a, b spanCall) int { return a.start.Compare(b.start) })
		checkFleetWindows(t, r, mine, faults, instances)
		checkLiveAfter(t, r, mine, last.Add(r.Limit.Window))
	}
}

// checkFleetWindows checks every window-long interval that starts at an
// allowed call's start against the bound that applies to it (see
// TestRecoveryFleetWindows).
func checkFleetWindows(t *testing.T, r ratelimit.Rule, calls []spanCall, faults []fault, instances int) {
	t.Helper()
	w := r.Limit.Window - time.Microsecond // the limiter keeps whole µs (see testkit.MostContained)
	rate := int(r.Limit.Rate)
	share := (rate + instances - 1) / instances
	worst := 0
	for i, first := range calls {
		from, to := first.start, first.start.Add(w)
		n := 0
		for _, c := range calls[i:] {
			if !c.start.Before(to) {
				break
			}
			if c.end.Before(to) {
				n += c.n
			}
		}
		bound, why := instances*share, "the shares together"
		for _, f := range faults {
			if f.in.Before(from) || !f.start.Before(to) {
				continue
			}
			// The window may hold this outage's start (somewhere from
			// f.start to f.in): each instance may have allowed its own
			// events before it (every call that may have been decided
			// by then), and its share or what it already had after it.
			own := make([]int, instances)
			for _, c := range calls {
				if !c.start.After(f.in) && c.end.After(f.start.Add(-w)) {
					own[c.inst] += c.n
				}
			}
			bound, why = 0, "Σ max(own, share) at an outage's start"
			for _, o := range own {
				bound += max(o, share)
			}
		}
		if n > bound {
			t.Errorf("rule %q: %d events inside one window from +%v, more than %d (%s); faults %s", r.Name, n, from.Sub(faults[0].start).Round(time.Millisecond), bound, why, faultTimes(faults))
			for _, c := range calls[i:] {
				if c.start.Before(to) && c.end.Before(to) {
					t.Logf("  instance %d allowed %d at +%v (took %v)", c.inst, c.n, c.start.Sub(faults[0].start).Round(time.Microsecond), c.end.Sub(c.start).Round(time.Microsecond))
				}
			}
			return
		}
		worst = max(worst, n-bound)
	}
	t.Logf("rule %q (Rate %d, Window %v): every window within its bound (closest: %d under it)", r.Name, rate, r.Limit.Window, -worst)
}

// checkLiveAfter checks liveness from from to the last call: every
// interval of Window + Window/5 holds at least 0.9 × Rate allowed calls
// (by their return), and so does each whole window, logged one by one, in
// total.
//
// Not each tumbling window on its own: while demand exceeds it, an exact
// log admits a call when each slot frees, a reuse delay later (the round
// trip, the shield's retry, a stall of the scheduler). A slot is used once
// per Window plus that delay, so one whose use drifts across a window's
// boundary skips that window, and the slots admitted together at a
// recovery drift together: in CI a healthy fleet admitted 30, 30, 26, 30
// in consecutive windows of recover0 (Rate 30), the 4 that window lacked
// taken just after its end. An interval of Window + D holds a use of every
// slot whose reuse delay is under D.
func checkLiveAfter(t *testing.T, r ratelimit.Rule, calls []spanCall, from time.Time) {
	t.Helper()
	if len(calls) == 0 {
		t.Fatalf("rule %q: nothing allowed", r.Name)
	}
	end := calls[len(calls)-1].end
	w := r.Limit.Window
	in := func(a, b time.Time) (n int, per [4]int) {
		for _, c := range calls {
			if !c.end.Before(a) && c.end.Before(b) {
				n += c.n
				per[c.inst%len(per)] += c.n
			}
		}
		return n, per
	}
	windows, total := 0, 0
	for a := from; !a.Add(w).After(end); a = a.Add(w) {
		n, per := in(a, a.Add(w))
		t.Logf("rule %q: window from +%v after the last recovery's window: %d (by instance %v)", r.Name, a.Sub(from).Round(time.Millisecond), n, per)
		windows++
		total += n
	}
	if windows == 0 {
		t.Errorf("rule %q: no whole window after %s to check liveness in", r.Name, from.Format("15:04:05.000"))
		return
	}
	if 10*total < 9*windows*int(r.Limit.Rate) {
		t.Errorf("rule %q: %d windows after the last recovery admitted %d, under 0.9 × Rate (%d) each", r.Name, windows, total, r.Limit.Rate)
	}
	span := w + w/5
	least, at := -1, from
	for a := from; !a.Add(span).After(end); a = a.Add(w / 20) {
		if n, _ := in(a, a.Add(span)); least < 0 || n < least {
			least, at = n, a
		}
	}
	t.Logf("rule %q: the fewest in an interval of %v: %d, from +%v", r.Name, span, least, at.Sub(from).Round(time.Millisecond))
	if 10*least < 9*int(r.Limit.Rate) {
		t.Errorf("rule %q: the %v from %s, after the last recovery, admitted %d, under 0.9 × Rate (%d)", r.Name, span, at.Format("15:04:05.000000"), least, r.Limit.Rate)
	}
}

// faultTimes says when each fault began and ended, from the first's start.
func faultTimes(faults []fault) string {
	var b strings.Builder
	for _, f := range faults {
		fmt.Fprintf(&b, "[%s +%v..+%v] ", f.kind, f.start.Sub(faults[0].start).Round(time.Millisecond), f.end.Sub(faults[0].start).Round(time.Millisecond))
	}
	return b.String()
}
