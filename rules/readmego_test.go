package rules_test

import (
	"testing"

	"github.com/ratelimit-go/ratelimit/internal/readme"
)

// TestREADMEGoBlocks compiles the Go blocks of README.md and docs/*.md that
// belong to this module (they use package rules), by the convention of
// package internal/readme.
func TestREADMEGoBlocks(t *testing.T) {
	if err := readme.Check("..", "rules"); err != nil {
		t.Fatal(err)
	}
}
