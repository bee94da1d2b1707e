package breaker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/redisio"
	"github.com/sony/gobreaker/v2"
)

// The errors of the tests' requests: an outage, a misuse reply (Redis
// answered) and a caller that left.
var (
	errOutage = errors.New("i/o timeout")
	errMisuse = errors.New("WRONGTYPE")
	errGone   = errors.New("context canceled")
)

func config(trip int, probeAfter time.Duration) Config {
	return Config{
		TripAfter:  trip,
		ProbeAfter: probeAfter,
		Successful: func(err error) bool { return err == nil || err == errMisuse },
		Excluded:   func(err error) bool { return err == errGone },
		Changes:    NewQueue(),
	}
}

// call sends one request through b that returns err, and reports whether
// the request ran and what Execute returned.
func call(b *Breaker, err error) (ran bool, got error) {
	got = b.Execute(func() (struct{}, error) {
		ran = true
		return struct{}{}, err
	})
	return ran, got
}

// changes returns the changes q holds, delivered as Run delivers them.
func changes(q *Queue) []Change {
	var got []Change
	q.drain(func(c Change) { got = append(got, c) })
	return got
}

func TestBreakerOpensAfterTripAfterOutages(t *testing.T) {
	c := config(3, time.Hour)
	b := New("redis", c, redisio.NewGate(time.Second))
	for i := range 2 {
		if ran, err := call(b, errOutage); !ran || err != errOutage {
			t.Fatalf("outage %d: ran %v, err %v", i+1, ran, err)
		}
	}
	if b.State() != Closed || b.Resting() {
		t.Fatalf("after 2 of 3 outages: state %v, resting %v", b.State(), b.Resting())
	}
	call(b, errOutage)
	if b.State() != Open || !b.Resting() {
		t.Fatalf("after 3 outages: state %v, resting %v", b.State(), b.Resting())
	}
	if left := b.UntilProbe(); left <= time.Hour-time.Minute || left > time.Hour {
		t.Fatalf("UntilProbe %v just after opening, want about an hour", left)
	}
	if ran, err := call(b, nil); ran || !errors.Is(err, gobreaker.ErrOpenState) {
		t.Fatalf("an open breaker: ran %v, err %v", ran, err)
	}
	want := []Change{{Name: "redis", From: Closed, To: Open}}
	if got := changes(c.Changes); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
}

// A misuse reply is Redis' answer: it breaks a run of outages as a success
// does. A caller that left neither counts nor breaks the run.
func TestBreakerCountsOnlyRedisFaults(t *testing.T) {
	b := New("redis", config(2, time.Hour), redisio.NewGate(time.Second))
	for range 3 {
		call(b, errOutage)
		call(b, errMisuse)
	}
	if b.State() != Closed {
		t.Fatalf("outages each followed by a misuse reply opened the breaker")
	}
	call(b, errOutage)
	call(b, errGone)
	call(b, errGone)
	if b.State() != Closed {
		t.Fatalf("callers that left counted as outages")
	}
	call(b, errOutage)
	if b.State() != Open {
		t.Fatalf("2 outages with only callers that left between them: state %v, want open", b.State())
	}
}

func TestBreakerProbesAfterProbeAfter(t *testing.T) {
	const probeAfter = 20 * time.Millisecond
	c := config(1, probeAfter)
	b := New("redis", c, redisio.NewGate(time.Second))
	if b.UntilProbe() != probeAfter {
		t.Fatalf("a closed breaker's UntilProbe %v, want ProbeAfter", b.UntilProbe())
	}
	call(b, errOutage)
	time.Sleep(probeAfter + 5*time.Millisecond)
	if b.Resting() {
		t.Fatal("still resting after ProbeAfter")
	}
	if left := b.UntilProbe(); left != time.Millisecond {
		t.Fatalf("UntilProbe %v once due, want the 1ms floor", left)
	}
	// The probe fails: open again, resting anew.
	if ran, _ := call(b, errOutage); !ran {
		t.Fatal("the probe did not run")
	}
	if b.State() != Open {
		t.Fatalf("after a failed probe: state %v, want open", b.State())
	}
	time.Sleep(probeAfter + 5*time.Millisecond)
	if ran, _ := call(b, nil); !ran || b.State() != Closed {
		t.Fatalf("a successful probe: ran %v, state %v", ran, b.State())
	}
	want := []Change{
		{"redis", Closed, Open}, {"redis", Open, HalfOpen}, {"redis", HalfOpen, Open},
		{"redis", Open, HalfOpen}, {"redis", HalfOpen, Closed},
	}
	if got := changes(c.Changes); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
}

// While its probe is under way, a half-open breaker refuses other calls.
func TestBreakerHalfOpenLetsOneProbeThrough(t *testing.T) {
	const probeAfter = 10 * time.Millisecond
	b := New("redis", config(1, probeAfter), redisio.NewGate(time.Second))
	call(b, errOutage)
	time.Sleep(probeAfter + 5*time.Millisecond)
	var inner error
	b.Execute(func() (struct{}, error) {
		if b.State() != HalfOpen {
			t.Errorf("during the probe: state %v, want half-open", b.State())
		}
		_, inner = call(b, nil)
		return struct{}{}, nil
	})
	if !errors.Is(inner, gobreaker.ErrTooManyRequests) {
		t.Fatalf("a call during the probe: %v, want ErrTooManyRequests", inner)
	}
}

func TestBreakerNotesAnswers(t *testing.T) {
	b := New("redis", config(1, time.Hour), redisio.NewGate(time.Second))
	if b.LastAnswer() != AnswerNone {
		t.Fatalf("a new breaker's LastAnswer %v", b.LastAnswer())
	}
	for _, a := range []Answer{AnswerYes, AnswerYes, AnswerNo, AnswerYes} {
		b.NoteAnswer(a)
		if b.LastAnswer() != a {
			t.Fatalf("LastAnswer %v after noting %v", b.LastAnswer(), a)
		}
	}
}

func TestQueueDeliversInOrder(t *testing.T) {
	q := NewQueue()
	done := make(chan struct{})
	got := make(chan Change, 100)
	finished := make(chan struct{})
	go func() {
		q.Run(done, func(c Change) { got <- c })
		close(finished)
	}()
	for i := range 50 {
		q.push(Change{Name: fmt.Sprint(i)})
	}
	for i := range 50 {
		if c := <-got; c.Name != fmt.Sprint(i) {
			t.Fatalf("change %d delivered as %s", i, c.Name)
		}
	}
	// What is pushed before done closes is delivered before Run returns.
	for i := range 5 {
		q.push(Change{Name: fmt.Sprint("late", i)})
	}
	close(done)
	<-finished
	for i := range 5 {
		if c := <-got; c.Name != fmt.Sprint("late", i) {
			t.Fatalf("late change %d delivered as %s", i, c.Name)
		}
	}
}

func TestSetSingleRedis(t *testing.T) {
	c := config(1, time.Hour)
	shared := redisio.NewGate(time.Second)
	s := NewSet(false, c, shared)
	if s.Cluster() || len(s.All()) != 1 {
		t.Fatalf("a single Redis' set: cluster %v, %d breakers", s.Cluster(), len(s.All()))
	}
	b := s.All()[0]
	for _, key := range []string{"a", "b", "{x}y", ""} {
		if s.ForKey(key) != b {
			t.Fatalf("ForKey(%q) is not the one breaker", key)
		}
	}
	if b.Gate() != shared {
		t.Fatal("the breaker does not send through the shared gate")
	}
	call(b, errOutage)
	if got := changes(c.Changes); len(got) != 1 || got[0].Name != "redis" {
		t.Fatalf("changes %v, want one of the breaker named redis", got)
	}
}

func TestSetCluster(t *testing.T) {
	c := config(1, time.Hour)
	shared := redisio.NewGate(time.Second)
	s := NewSet(true, c, shared)
	all := s.All()
	if !s.Cluster() || len(all) != redisio.ClusterSlots/SlotsPerRange {
		t.Fatalf("a Cluster's set: cluster %v, %d breakers", s.Cluster(), len(all))
	}
	for i := range 1000 {
		key := fmt.Sprint("key", i)
		if s.ForKey(key) != all[redisio.KeySlot(key)/SlotsPerRange] {
			t.Fatalf("ForKey(%q) is not the breaker of slot %d", key, redisio.KeySlot(key))
		}
	}
	// One range's outage opens that range's breaker only.
	call(all[0], errOutage)
	call(all[len(all)-1], errOutage)
	for i, b := range all {
		if open := i == 0 || i == len(all)-1; (b.State() == Open) != open {
			t.Fatalf("breaker %d: state %v", i, b.State())
		}
	}
	got := changes(c.Changes)
	if len(got) != 2 || got[0].Name != "slots 0-63" || got[1].Name != "slots 16320-16383" {
		t.Fatalf("changes %v", got)
	}
	// The ranges of slots 100-200 (1 to 3) go to one master's gate.
	g := redisio.NewGate(time.Second)
	s.SetGate(100, 200, g)
	for i, b := range all {
		want := shared
		if i >= 1 && i <= 3 {
			want = g
		}
		if b.Gate() != want {
			t.Fatalf("breaker %d sends through the wrong gate", i)
		}
	}
}
