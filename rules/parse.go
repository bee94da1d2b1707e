package rules

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"go.yaml.in/yaml/v3"
)

// Parse reads a rules file's contents (see the package documentation for
// the format) and returns its rules. Every rule is checked as the library
// would check it ([ratelimit.Rule.Validate]), its overrides included. An
// error wraps [ErrInvalid] (and [ratelimit.ErrInvalidRule] when the library
// rejected a rule) and names the line and the rule.
func Parse(data []byte) (*Set, error) { return parse("", data) }

// Load reads the rules file at path, as Parse does; its errors also name
// the file. An unreadable file's error wraps the os package's (e.g.
// [fs.ErrNotExist]).
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return parse(path, data)
}

// The fields of each mapping of the format, in the order the
// documentation lists them.
var (
	topFields      = []string{"rules"}
	ruleFields     = []string{"name", "kind", "rate", "window", "burst", "period", "location", "dry_run", "degraded", "penalty", "prefetch", "overrides"}
	penaltyFields  = []string{"warn_after", "ban_after", "ban_for", "memory", "ban_growth", "max_ban_for"}
	overrideFields = []string{"key", "rate", "window", "burst"}
)

// parser reads one file; file is "" for Parse.
type parser struct {
	file string
}

// errAt returns an error at line, about the rule (and override) named.
func (p *parser) errAt(line int, rule, override string, cause error, format string, args ...any) error {
	return &fileError{pos: position(p.file, line, rule, override), msg: fmt.Sprintf(format, args...), cause: cause}
}

// document decodes data, which must hold one YAML document that is not
// empty.
func document(data []byte, bad func(int, string, ...any) error) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, bad(0, "the file is empty: it has no rules")
	case err != nil:
		return nil, bad(0, "%v", err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, bad(next.Line, "a second YAML document: a rules file holds one")
	case !errors.Is(err, io.EOF):
		return nil, bad(0, "%v", err)
	}
	if len(doc.Content) == 0 {
		return nil, bad(doc.Line, "the file is empty: it has no rules")
	}
	return &doc, nil
}

func parse(file string, data []byte) (*Set, error) {
	p := &parser{file: file}
	bad := func(line int, format string, args ...any) error { return p.errAt(line, "", "", nil, format, args...) }
	doc, err := document(data, bad)
	if err != nil {
		return nil, err
	}
	top, err := mapping(doc.Content[0], "the file", topFields, bad)
	if err != nil {
		return nil, err
	}
	list, ok := top["rules"]
	if !ok {
		return nil, bad(doc.Content[0].Line, "the file has no rules field")
	}
	if list.val.Kind != yaml.SequenceNode || len(list.val.Content) == 0 {
		got := describe(list.val)
		if list.val.Kind == yaml.SequenceNode {
			got = "an empty list"
		}
		return nil, bad(list.line(), "rules: want a list of at least one rule, got %s", got)
	}
	s := &Set{rules: make(map[string]*entry, len(list.val.Content))}
	for i, n := range list.val.Content {
		e, err := p.rule(i, n)
		if err != nil {
			return nil, err
		}
		if first, dup := s.rules[e.rule.Name]; dup {
			return nil, p.errAt(e.line, "rule "+strconv.Quote(e.rule.Name), "", nil, "name %q is taken by the rule at line %d", e.rule.Name, first.line)
		}
		s.rules[e.rule.Name] = e
		s.names = append(s.names, e.rule.Name)
	}
	slices.Sort(s.names)
	return s, nil
}

// rule reads the i-th rule of the list.
func (p *parser) rule(i int, n *yaml.Node) (*entry, error) {
	ref := fmt.Sprintf("rule %d", i+1) // a rule without a valid name
	if name := nameOf(n); name != "" {
		ref = "rule " + strconv.Quote(name)
	}
	bad := func(line int, format string, args ...any) error { return p.errAt(line, ref, "", nil, format, args...) }
	fields, err := mapping(n, "", ruleFields, bad)
	if err != nil {
		return nil, err
	}
	f, ok := fields["name"]
	if !ok {
		return nil, bad(n.Line, "name is required")
	}
	name, msg := text(f)
	if msg != "" {
		return nil, bad(f.line(), "%s", msg)
	}
	e := &entry{line: n.Line, rule: ratelimit.Rule{Name: name}}
	kind := defaultKind
	if f, ok := fields["kind"]; ok {
		if kind, msg = scalar(f); msg != "" {
			return nil, bad(f.line(), "%s", msg)
		}
	}
	spec, msg := kindOf(kind)
	if msg != "" {
		return nil, bad(fields["kind"].line(), "%s", msg)
	}
	e.kind, e.rule.Kind, e.rule.Approximate = kind, spec.kind, spec.approximate
	if msg := p.limit(&e.rule.Limit, fields, spec, kind); msg.text != "" {
		return nil, bad(cmpLine(msg.line, n.Line), "%s", msg.text)
	}
	if err := p.common(&e.rule, fields, bad); err != nil {
		return nil, err
	}
	if err := e.rule.Validate(); err != nil {
		return nil, p.errAt(n.Line, "", "", err, "%v", err)
	}
	if f, ok := fields["overrides"]; ok {
		if err := p.overrides(e, f, spec); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// common reads into r the fields every kind takes: dry_run, degraded,
// prefetch and penalty.
func (p *parser) common(r *ratelimit.Rule, fields map[string]field, bad func(int, string, ...any) error) error {
	for _, f := range sorted(fields) {
		var msg string
		switch f.name {
		case "dry_run":
			r.DryRun, msg = boolean(f)
		case "degraded":
			r.Degraded, msg = oneOf(f, degradedPolicies)
		case "prefetch":
			r.Prefetch, msg = duration(f)
		case "penalty":
			var err error
			if r.Penalty, err = p.penalty(f, bad); err != nil {
				return err
			}
		}
		if msg != "" {
			return bad(f.line(), "%s", msg)
		}
	}
	return nil
}

// nameOf returns the name field of a rule's mapping, or "" when it has
// none (yet to be reported), so that every error about the rule names it.
func nameOf(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Kind == yaml.ScalarNode && k.Value == "name" &&
			v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
			return v.Value
		}
	}
	return ""
}

// lineMsg is a message about a line (0: the rule's).
type lineMsg struct {
	line int
	text string
}

// cmpLine returns line, or def when line is 0.
func cmpLine(line, def int) int {
	if line == 0 {
		return def
	}
	return line
}

// limit reads the limit fields of a rule of kind spec into l: rate, and
// the optional fields the kind takes, which it requires.
func (p *parser) limit(l *ratelimit.Limit, fields map[string]field, spec *kindSpec, kind string) lineMsg {
	f, ok := fields["rate"]
	if !ok {
		return lineMsg{0, "rate is required"}
	}
	var msg string
	if l.Rate, msg = integer(f); msg != "" {
		return lineMsg{f.line(), msg}
	}
	for _, name := range []string{"window", "burst", "period", "location"} {
		f, ok := fields[name]
		switch {
		case ok && !spec.takes(name):
			return lineMsg{f.line(), fmt.Sprintf("%s is not a field of kind %s", name, kind)}
		case !ok && (name == "window" && spec.window || name == "period" && spec.period):
			return lineMsg{0, fmt.Sprintf("%s is required for kind %s", name, kind)}
		case !ok:
			continue
		}
		switch name {
		case "window":
			l.Window, msg = duration(f)
		case "burst":
			l.Burst, msg = integer(f)
		case "period":
			l.Period, msg = oneOf(f, periods)
		case "location":
			var zone string
			if zone, msg = text(f); msg == "" {
				loc, err := time.LoadLocation(zone)
				if err != nil {
					msg = fmt.Sprintf("location: %q is not a time zone this program knows: %v", zone, err)
				}
				l.Location = loc
			}
		}
		if msg != "" {
			return lineMsg{f.line(), msg}
		}
	}
	return lineMsg{}
}

// penalty reads a rule's penalty field.
func (p *parser) penalty(f field, bad func(int, string, ...any) error) (*ratelimit.Penalty, error) {
	fields, err := mapping(f.val, "penalty", penaltyFields, bad)
	if err != nil {
		return nil, err
	}
	pen := &ratelimit.Penalty{}
	for _, f := range sorted(fields) {
		var msg string
		switch f.name {
		case "warn_after":
			pen.WarnAfter, msg = integer(f)
		case "ban_after":
			pen.BanAfter, msg = integer(f)
		case "ban_for":
			pen.BanFor, msg = duration(f)
		case "memory":
			pen.Memory, msg = duration(f)
		case "ban_growth":
			pen.BanGrowth, msg = float(f)
		case "max_ban_for":
			pen.MaxBanFor, msg = duration(f)
		}
		if msg != "" {
			return nil, bad(f.line(), "penalty: %s", msg)
		}
	}
	return pen, nil
}

// sorted returns fields in the order of their lines, so that the first
// mistake in the file is the one reported.
func sorted(fields map[string]field) []field {
	fs := make([]field, 0, len(fields))
	for _, f := range fields {
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b field) int {
		return cmp.Or(cmp.Compare(a.line(), b.line()), cmp.Compare(a.key.Column, b.key.Column))
	})
	return fs
}
