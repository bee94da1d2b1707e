package ratelimit

import (
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestCachedPlanSeesEveryChange checks that the plan cache answers a rule
// changed in any field, or whose Penalty changed in place, with the plan
// compile gives for it at once: issue 11 wants a changed rule to apply at
// once.
func TestCachedPlanSeesEveryChange(t *testing.T) {
	pen := &Penalty{WarnAfter: 1, BanAfter: 3, BanFor: time.Second}
	r := Rule{Name: "plan-cache", Limit: PerSecond(10), Penalty: pen}
	changes := []struct {
		name   string
		change func()
	}{
		{"Rate", func() { r.Limit.Rate = 11 }},
		{"Window", func() { r.Limit.Window = 2 * time.Second }},
		{"Name", func() { r.Name = "plan-cache-2" }},
		{"Approximate", func() { r.Approximate = true }},
		{"Kind", func() { r.Approximate, r.Kind = false, GCRA }},
		{"Burst", func() { r.Limit.Burst = 20 }},
		{"Penalty.BanAfter in place", func() { pen.BanAfter = 4 }},
		{"Penalty.BanFor in place", func() { pen.BanFor = time.Minute }},
		{"Penalty.BanGrowth in place", func() { pen.BanGrowth = 2 }},
		{"Penalty.Memory in place", func() { pen.Memory = time.Hour }},
		{"Penalty.WarnAfter in place", func() { pen.WarnAfter = 2 }},
		{"another Penalty", func() { r.Penalty = &Penalty{BanAfter: 9, BanFor: time.Second} }},
		{"no Penalty", func() { r.Penalty = nil }},
		{"Degraded", func() { r.Degraded = DegradedDeny }},
		{"quota", func() { r.Kind, r.Limit = CalendarQuota, Limit{Rate: 5, Period: Week} }},
		{"Location", func() { r.Limit.Location = time.FixedZone("x", 3600) }},
	}
	check := func(step string) {
		t.Helper()
		for range 3 { // a miss, then hits
			var buf plan
			got, err := r.cachedPlan(&buf)
			want, werr := r.compile()
			if err != nil || werr != nil {
				t.Fatalf("%s: cachedPlan: %v, compile: %v", step, err, werr)
			}
			if *got != want {
				t.Fatalf("%s: cached plan %+v, compile gives %+v", step, *got, want)
			}
		}
	}
	check("first")
	for _, c := range changes {
		c.change()
		check(c.name)
	}
}

// TestCachedPlanSharedSlot checks rules that keep evicting each other
// from one slot: every call still gets its own rule's plan.
func TestCachedPlanSharedSlot(t *testing.T) {
	a := Rule{Name: "slot-a", Limit: PerSecond(7)}
	b := a // the slot's digest does not read Penalty: the same slot
	b.Penalty = &Penalty{BanAfter: 2, BanFor: time.Second}
	if planIndex(&a) != planIndex(&b) {
		t.Fatal("the two rules are in different slots")
	}
	for i := range 40 {
		r := &a
		if i%2 == 1 {
			r = &b
		}
		var buf plan
		got, err := r.cachedPlan(&buf)
		want, _ := r.compile()
		if err != nil || *got != want {
			t.Fatalf("call %d: %+v, %v; want %+v", i, got, err, want)
		}
	}
}

// TestCachedPlanInvalid checks that an invalid rule is never cached: it
// fails on every call, and a valid rule in its slot is not disturbed.
func TestCachedPlanInvalid(t *testing.T) {
	bad := Rule{Name: "plan-bad", Limit: Limit{Rate: 0, Window: time.Second}}
	for range 3 {
		var buf plan
		if _, err := bad.cachedPlan(&buf); err == nil {
			t.Fatal("an invalid rule compiled")
		}
	}
}

// TestCachedPlanConcurrent has goroutines compile more rules than the cache
// has slots, at once, under -race: every call gets its own rule's plan.
func TestCachedPlanConcurrent(t *testing.T) {
	rules := make([]Rule, 2*len(plans))
	for i := range rules {
		rules[i] = Rule{Name: "concurrent", Limit: PerSecond(1 + i%7), Kind: Kind(i % 2)}
		if i%3 == 0 {
			rules[i].Penalty = &Penalty{BanAfter: 1 + i, BanFor: time.Second}
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				r := &rules[(g*131+i)%len(rules)]
				var buf plan
				got, err := r.cachedPlan(&buf)
				want, werr := r.compile()
				if err != nil || werr != nil || *got != want {
					t.Errorf("rule %+v: %+v, %v; want %+v, %v", *r, got, err, want, werr)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestMatchesComparesEveryField pins the fields compiled.matches compares
// one by one: a field added to Rule or Limit must be added there too (and
// here), or a rule changed only in it would take a stale plan.
func TestMatchesComparesEveryField(t *testing.T) {
	for _, c := range []struct {
		typ    reflect.Type
		fields []string
	}{
		{reflect.TypeFor[Rule](), []string{"Name", "Limit", "Penalty", "Degraded", "Approximate", "Kind", "DryRun", "Prefetch"}},
		{reflect.TypeFor[Limit](), []string{"Rate", "Window", "Burst", "Period", "Location"}},
	} {
		var got []string
		for i := range c.typ.NumField() {
			got = append(got, c.typ.Field(i).Name)
		}
		if !slices.Equal(got, c.fields) {
			t.Errorf("%v has the fields %v; compiled.matches compares %v: compare the new ones there", c.typ, got, c.fields)
		}
	}
}
