package grpclimit_test

import (
	"testing"

	"github.com/ratelimit-go/ratelimit/internal/readme"
)

// TestREADME compiles the Go blocks of README.md and docs/*.md that belong
// to this module (they use its package), by the convention of package
// internal/readme.
func TestREADME(t *testing.T) {
	if err := readme.Check("..", "grpclimit"); err != nil {
		t.Fatal(err)
	}
}
