package ratelimitotel_test

import (
	"testing"

	"github.com/ratelimit-go/ratelimit/internal/readme"
)

// TestREADME compiles README.md's Go blocks that belong to this module
// (they use its package), by the convention of package internal/readme.
func TestREADME(t *testing.T) {
	n, err := readme.Compile("..", "otel", "../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no Go block of README.md belongs to this module: the test checks nothing")
	}
}
