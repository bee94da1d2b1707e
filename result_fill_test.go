package ratelimit

import (
	"reflect"
	"testing"
)

// TestFillSetsEveryField: decision.fill sets a Result field by field (see
// fill), so a field it forgot would keep what the Result held before.
// Filling a Result whose every field is set must give what filling a
// zero Result gives, for decisions that set each field fill sets.
func TestFillSetsEveryField(t *testing.T) {
	for _, d := range []decision{
		{allowed: true, count: 3, reset: 5},
		{count: 9, retry: 7, reset: 8, violations: 2, warned: true},
		{banned: true, banLeft: 11, retry: 11, reset: 4, violations: 5, bans: 1},
	} {
		for _, degraded := range []bool{false, true} {
			var want Result
			d.fill(&want, 10, degraded)
			got := dirtyResult(t)
			d.fill(&got, 10, degraded)
			if got != want {
				t.Errorf("fill of %+v into a used Result = %+v; into a zero one %+v", d, got, want)
			}
		}
	}
}

// dirtyResult returns a Result whose every field is not its zero value.
func dirtyResult(t *testing.T) Result {
	var r Result
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(-12345)
		default:
			t.Fatalf("Result.%s: a field of kind %s: teach dirtyResult to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	return r
}
