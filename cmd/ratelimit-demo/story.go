package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/redis/rueidis"
)

// storyRule is the rule of the story: five claims in any minute, warnings
// from the third violation, a half-hour ban at the fifth.
var storyRule = ratelimit.Rule{
	Name:    "coupon:claim",
	Limit:   ratelimit.PerMinute(5),
	Penalty: &ratelimit.Penalty{WarnAfter: 3, BanAfter: 5, BanFor: 30 * time.Minute},
}

// storyStart is where the story's fake clock starts; times are printed
// relative to it.
var storyStart = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

// storyTimeout is the story's budget for one Redis call and for a
// reconnection. It is generous, so that a busy machine never turns a
// healthy call into a degraded row; the outage fails calls at once
// (connection refused), long before it.
const storyTimeout = time.Second

// storyOptions configure the story's Limiter: a fake clock, so the output
// is the same on every run, and a breaker that trips after two failed
// calls and probes again after 100ms, so the outage is short.
func storyOptions(clk ratelimit.Clock) ratelimit.Options {
	return ratelimit.Options{
		Clock:      clk,
		Timeout:    storyTimeout,
		TripAfter:  2,
		ProbeAfter: 100 * time.Millisecond,
		KeyPrefix:  "ratelimit-demo:",
		Logger:     slog.New(slog.DiscardHandler),
	}
}

// story plays the demo on client and writes it to w as tables. With an
// outage it also takes Redis away from the limiter and gives it back (acts
// 2 and 3); without one (a Redis the demo cannot reach through a proxy of
// its own) it plays act 1 only, and says so.
func story(w io.Writer, client rueidis.Client, out *outage) error {
	clk := ratelimittest.NewClock(storyStart)
	opts := storyOptions(clk)
	var path ratelimit.Path // where the last decision was made
	opts.OnDecision = func(d ratelimit.Decision) { path = d.Path }
	lim, err := ratelimit.New(client, opts)
	if err != nil {
		return err
	}
	defer lim.Close()
	ctx := context.Background()
	for _, user := range []string{"alice", "bob"} { // a real Redis may hold an earlier run's state
		if err := lim.Reset(ctx, storyRule, user); err != nil {
			return err
		}
	}
	s := &scene{w: w, lim: lim, clk: clk, calls: map[string]int{}, path: &path}
	p := storyRule.Penalty
	fmt.Fprintf(w, "Rule %q: %v, warned from %d violations, banned for %v at %d.\n",
		storyRule.Name, storyRule.Limit, p.WarnAfter, p.BanFor, p.BanAfter)

	if err := s.act1(); err != nil || out == nil {
		if err == nil {
			fmt.Fprintln(w, "\nActs 2 and 3 take Redis away and give it back: the demo does that to its embedded miniredis,")
			fmt.Fprintln(w, "or by cutting a proxy of its own to a single Redis server; it cannot here, so it stops.")
		}
		return err
	}
	if err := s.act2(out); err != nil {
		return err
	}
	return s.act3(ctx, out, func() (*ratelimit.Limiter, error) { return ratelimit.New(client, opts) })
}

// act1: alice claims a coupon every second, and is warned, then banned.
func (s *scene) act1() error {
	s.act("1. alice claims a coupon every second")
	for i := range 10 {
		s.call("alice", time.Duration(i)*time.Second)
	}
	s.call("alice", 10*time.Minute)
	return s.end()
}

// act2: Redis goes away (out.stop) while bob claims, and alice is still
// banned.
func (s *scene) act2(out *outage) error {
	s.act(out.title2)
	for i := range 3 {
		s.call("bob", 10*time.Minute+time.Duration(i)*time.Second)
	}
	s.note(out.down)
	out.stop()
	for i := 3; i < 6; i++ {
		s.call("bob", 10*time.Minute+time.Duration(i)*time.Second)
	}
	s.call("alice", 10*time.Minute+6*time.Second)
	if err := s.end(); err != nil {
		return err
	}
	w := s.w
	fmt.Fprintln(w, "The fallback decides from the events it mirrored while Redis was up: bob still gets")
	fmt.Fprintln(w, "only 5 claims a minute. alice's ban needs no Redis at all: the process keeps the bans")
	fmt.Fprintln(w, "Redis reported (the hot-key shield), so a banned client costs no round trip, outage or not.")
	fmt.Fprintln(w, "DECIDED BY says where each answer came from: redis, the shield, or the local fallback.")
	return nil
}

// act3: Redis comes back (out.start), the write-back delivers what was
// decided without it, and a second instance of the shop (made by
// another) refuses bob as the first does.
func (s *scene) act3(ctx context.Context, out *outage, another func() (*ratelimit.Limiter, error)) error {
	s.act(out.title3)
	if err := out.start(); err != nil {
		return err
	}
	lim := s.lim
	if err := waitForRedis(ctx, lim); err != nil {
		return err
	}
	if err := waitForWriteBack(lim); err != nil {
		return err
	}
	st := lim.Stats()
	s.note(fmt.Sprintf("-- written back to Redis: %d claims decided without it (and bob's violation) --", st.WrittenBack))
	s.call("bob", 10*time.Minute+7*time.Second)
	other, err := another()
	if err != nil {
		return err
	}
	defer other.Close()
	s.note("-- another instance of the shop, which never saw bob --")
	s.lim = other
	s.call("bob", 10*time.Minute+7*time.Second)
	s.lim = lim
	s.call("alice", 10*time.Minute+8*time.Second)
	s.call("alice", 30*time.Minute+9*time.Second)
	if err := s.end(); err != nil {
		return err
	}
	w := s.w
	fmt.Fprintln(w, "Decisions are Redis' again. As soon as Redis answered, the process wrote back what")
	fmt.Fprintln(w, "it had decided without it: bob's 2 claims and his violation. Redis' log holds all 5")
	fmt.Fprintln(w, "of bob's claims, so every instance refuses him until his first claim leaves the")
	fmt.Fprintln(w, "window at 00:11:00: bob gets exactly 5 claims in the minute across the outage, in")
	fmt.Fprintln(w, "the whole shop. alice's ban is over at 00:30:09, but her 5 violations are remembered")
	fmt.Fprintln(w, "for an hour: one more rejection bans her again at once.")
	return nil
}

// waitForWriteBack polls the Limiter's Stats until nothing waits to be
// written back to Redis. The write-back runs in the Limiter's own
// goroutine once the breaker closes, so this takes real time, if little.
func waitForWriteBack(lim *ratelimit.Limiter) error {
	deadline := time.Now().Add(5 * time.Second)
	for lim.Stats().WriteBackPending > 0 {
		if time.Now().After(deadline) {
			return errors.New("the write-back did not finish within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// waitForRedis polls, with Peek (which records nothing), until a decision
// comes from Redis again. The breaker probes Redis on wall time, so this
// takes real time: about Options.ProbeAfter.
func waitForRedis(ctx context.Context, lim *ratelimit.Limiter) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := lim.Peek(ctx, storyRule, "bob")
		if err != nil {
			return err
		}
		if !r.Degraded {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("redis did not come back within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scene prints the calls of one act as a table.
type scene struct {
	w     io.Writer
	lim   *ratelimit.Limiter
	clk   *ratelimittest.Clock
	calls map[string]int  // calls so far, per user
	path  *ratelimit.Path // where the last decision was made (Options.OnDecision)
	err   error           // the first error; later calls do nothing
}

// row is the layout of a table row: fixed widths, so that notes between
// rows do not move the columns.
const row = "%-8s  %-9s  %-7s  %-9s  %-10s  %-6s  %-6s  %-11s  %s\n"

func (s *scene) act(title string) {
	fmt.Fprintf(s.w, "\n%s\n", title)
	fmt.Fprintf(s.w, row, "TIME", "CALL", "ALLOWED", "REMAINING", "VIOLATIONS", "WARNED", "BANNED", "RETRY AFTER", "DECIDED BY")
}

// note prints a line between the rows.
func (s *scene) note(text string) { fmt.Fprintln(s.w, text) }

// call makes one claim of user's at the story time at and prints a row.
func (s *scene) call(user string, at time.Duration) {
	if s.err != nil {
		return
	}
	s.clk.Set(storyStart.Add(at))
	r, err := s.lim.Allow(context.Background(), storyRule, user)
	if err != nil {
		s.err = err
		return
	}
	s.calls[user]++
	retry := "-"
	if !r.Allowed {
		retry = r.RetryAfter.String()
	}
	source := s.path.String()
	if r.Degraded {
		source += " (degraded)"
	}
	fmt.Fprintf(s.w, row, clockTime(at), fmt.Sprintf("%s #%d", user, s.calls[user]), yesNo(r.Allowed, "yes", "no"),
		strconv.Itoa(r.Remaining), strconv.Itoa(r.Violations), yesNo(r.Warned, "yes", "-"), yesNo(r.Banned, "yes", "-"),
		retry, source)
}

// end returns the first error of the act's calls.
func (s *scene) end() error { return s.err }

// clockTime formats d since the story's start as hh:mm:ss.
func clockTime(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
