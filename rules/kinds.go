package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ratelimit-go/ratelimit"
)

// kindSpec is what one kind of the file format means to the library, and
// which of the optional limit fields it takes.
type kindSpec struct {
	kind        ratelimit.Kind
	approximate bool // Rule.Approximate
	window      bool // takes window (and requires it)
	burst       bool // takes burst
	period      bool // takes period (and requires it) and location
}

// kinds lists the values of a rule's kind field. A nil spec is a kind the
// format names but this version of the library cannot enforce yet.
var kinds = map[string]*kindSpec{
	"sliding-log":    {kind: ratelimit.SlidingLog, window: true},
	"approximate":    {kind: ratelimit.SlidingLog, approximate: true, window: true},
	"gcra":           {kind: ratelimit.GCRA, window: true, burst: true},
	"calendar-quota": {kind: ratelimit.CalendarQuota, period: true},
	"concurrency":    {kind: ratelimit.Concurrency, window: true},
	"fixed-window":   {kind: ratelimit.FixedWindow, window: true},
}

// defaultKind is the kind of a rule without a kind field.
const defaultKind = "sliding-log"

// kindOf returns the spec of the kind named name, or why there is none.
func kindOf(name string) (*kindSpec, string) {
	spec, known := kinds[name]
	switch {
	case !known:
		return nil, fmt.Sprintf("kind %q is unknown (one of %s)", name, strings.Join(kindNames(), ", "))
	case spec == nil:
		return nil, fmt.Sprintf("kind %q is not available in this version of the library (one of %s)", name, strings.Join(kindNames(), ", "))
	}
	return spec, ""
}

// kindNames returns the kinds this version enforces, sorted.
func kindNames() []string {
	var names []string
	for name, spec := range kinds {
		if spec != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// takes reports whether a rule of this kind may set the limit field field
// (window, burst, period or location).
func (k *kindSpec) takes(field string) bool {
	switch field {
	case "window":
		return k.window
	case "burst":
		return k.burst
	case "period", "location":
		return k.period
	}
	return true
}

// The names of the values of degraded and period.
var (
	degradedPolicies = map[string]ratelimit.DegradedPolicy{
		"local": ratelimit.DegradedLocal,
		"allow": ratelimit.DegradedAllow,
		"deny":  ratelimit.DegradedDeny,
	}
	periods = map[string]ratelimit.Period{
		"day":   ratelimit.Day,
		"week":  ratelimit.Week,
		"month": ratelimit.Month,
	}
)
