package logthrottle

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type kind int

const (
	outage kind = iota
	refused
	kinds
)

// lockedBuffer is a bytes.Buffer that concurrent handlers may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), msg)
}

// TestOnceAnIntervalUnderAHammer: 64 goroutines that log the same kind
// at once write one line between them, and a line of another kind is
// written all the same.
func TestOnceAnIntervalUnderAHammer(t *testing.T) {
	var out lockedBuffer
	l := New(slog.New(slog.NewTextHandler(&out, nil)), time.Hour, kinds)
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
	if wrote != 1 || out.lines("msg=down") != 1 {
		t.Fatalf("6,400 calls reported %d lines written and wrote %d, want 1", wrote, out.lines("msg=down"))
	}
	if !l.Log(refused, slog.LevelError, "noperm") || out.lines("msg=noperm") != 1 {
		t.Fatal("a line of another kind was held back")
	}
}

// TestAgainAfterTheInterval: a kind's next line is written once its
// interval has passed, not before.
func TestAgainAfterTheInterval(t *testing.T) {
	var out lockedBuffer
	l := New(slog.New(slog.NewTextHandler(&out, nil)), 50*time.Millisecond, kinds)
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
	if got := out.lines("msg=down"); got != 2 {
		t.Fatalf("wrote %d lines, want 2", got)
	}
}
