package rules

import (
	"slices"
	"strconv"

	"github.com/ratelimit-go/ratelimit"
	"go.yaml.in/yaml/v3"
)

// overrides reads a rule's overrides field into e: one rule per key, the
// rule's own with rate, window or burst replaced, each checked as the
// library would check it.
func (p *parser) overrides(e *entry, f field, spec *kindSpec) error {
	ref := "rule " + strconv.Quote(e.rule.Name)
	bad := func(line int, format string, args ...any) error { return p.errAt(line, ref, "", nil, format, args...) }
	if f.val.Kind != yaml.SequenceNode {
		return bad(f.line(), "overrides: want a list, got %s", describe(f.val))
	}
	e.overrides = make(map[string]ratelimit.Rule, len(f.val.Content))
	lines := make(map[string]int, len(f.val.Content))
	for _, n := range f.val.Content {
		fields, err := mapping(n, "override", overrideFields, bad)
		if err != nil {
			return err
		}
		k, ok := fields["key"]
		if !ok {
			return bad(n.Line, "override: key is required")
		}
		key, msg := text(k)
		if msg != "" {
			return bad(k.line(), "override: %s", msg)
		}
		if first, dup := lines[key]; dup {
			return bad(k.line(), "override: key %q appears twice (first at line %d)", key, first)
		}
		r, err := p.override(e, n.Line, key, fields, spec)
		if err != nil {
			return err
		}
		lines[key] = k.line()
		e.overrides[key] = r
		e.keys = append(e.keys, key)
	}
	slices.Sort(e.keys)
	return nil
}

// override returns e's rule with the limit fields of the override of key
// (at line) replaced, checked as the library would check it.
func (p *parser) override(e *entry, line int, key string, fields map[string]field, spec *kindSpec) (ratelimit.Rule, error) {
	bad := func(line int, format string, args ...any) error {
		return p.errAt(line, "rule "+strconv.Quote(e.rule.Name), key, nil, format, args...)
	}
	r := e.rule
	changed := false
	for _, f := range sorted(fields) {
		if f.name == "key" {
			continue
		}
		if !spec.takes(f.name) {
			return r, bad(f.line(), "%s is not a field of kind %s", f.name, e.kind)
		}
		var msg string
		switch f.name {
		case "rate":
			r.Limit.Rate, msg = integer(f)
		case "window":
			r.Limit.Window, msg = duration(f)
		case "burst":
			r.Limit.Burst, msg = integer(f)
		}
		if msg != "" {
			return r, bad(f.line(), "%s", msg)
		}
		changed = true
	}
	if !changed {
		return r, bad(line, "the override changes nothing: give it a rate, a window or a burst")
	}
	if err := r.Validate(); err != nil {
		return r, p.errAt(line, "", key, err, "%v", err)
	}
	return r, nil
}
