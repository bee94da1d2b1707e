package logthrottle_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/logthrottle"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

type kind int

const (
	outage kind = iota
	refused
	kinds
)

// lines counts the lines of out that carry msg.
func lines(out *testkit.SyncBuffer, msg string) int { return strings.Count(out.String(), msg) }

// TestOnceAnIntervalUnderAHammer: 64 goroutines that log the same kind
// at once write one line between them, and a line of another kind is
// written all the same.
func TestOnceAnIntervalUnderAHammer(t *testing.T) {
	var out testkit.SyncBuffer
	l := logthrottle.New(slog.New(slog.NewTextHandler(&out, nil)), time.Hour, kinds)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrote := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if l.Log(outage, slog.LevelWarn, "down") {
					mu.Lock()
					wrote++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if wrote != 1 || lines(&out, "msg=down") != 1 {
		t.Fatalf("6,400 calls reported %d lines written and wrote %d, want 1", wrote, lines(&out, "msg=down"))
	}
	if !l.Log(refused, slog.LevelError, "noperm") || lines(&out, "msg=noperm") != 1 {
		t.Fatal("a line of another kind was held back")
	}
}

// TestAgainAfterTheInterval: a kind's next line is written once its
// interval has passed, not before.
func TestAgainAfterTheInterval(t *testing.T) {
	var out testkit.SyncBuffer
	l := logthrottle.New(slog.New(slog.NewTextHandler(&out, nil)), 50*time.Millisecond, kinds)
	start := time.Now()
	if !l.Log(outage, slog.LevelWarn, "down") {
		t.Fatal("the first line was not written")
	}
	for !l.Log(outage, slog.LevelWarn, "down") {
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("the second line came %v after the first, within the interval", took)
	}
	if got := lines(&out, "msg=down"); got != 2 {
		t.Fatalf("wrote %d lines, want 2", got)
	}
}
