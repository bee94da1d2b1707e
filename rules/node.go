package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// field is one key of a YAML mapping and its value.
type field struct {
	name string
	key  *yaml.Node
	val  *yaml.Node
}

// line is the line of the field's key.
func (f field) line() int { return f.key.Line }

// mapping returns the fields of n, a mapping whose keys must all be in
// allowed and appear once each. what names the mapping in errors ("" for
// a rule, whose errors name it already); bad reports an error at a line.
func mapping(n *yaml.Node, what string, allowed []string, bad func(line int, format string, args ...any) error) (map[string]field, error) {
	inner := bad
	if what != "" {
		inner = func(line int, format string, args ...any) error {
			return bad(line, "%s: %s", what, fmt.Sprintf(format, args...))
		}
	}
	return fields(n, allowed, inner)
}

func fields(n *yaml.Node, allowed []string, bad func(line int, format string, args ...any) error) (map[string]field, error) {
	if n.Kind != yaml.MappingNode {
		return nil, bad(n.Line, "want a mapping of fields, got %s", describe(n))
	}
	fields := make(map[string]field, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			return nil, bad(k.Line, "%s is not a field name (merge keys and aliases are not supported)", describe(k))
		}
		if !slices.Contains(allowed, k.Value) {
			return nil, bad(k.Line, "unknown field %q (fields: %s)", k.Value, strings.Join(allowed, ", "))
		}
		if first, dup := fields[k.Value]; dup {
			return nil, bad(k.Line, "field %q appears twice (first at line %d)", k.Value, first.line())
		}
		if v.Kind == yaml.AliasNode {
			return nil, bad(v.Line, "%s: aliases are not supported", k.Value)
		}
		fields[k.Value] = field{name: k.Value, key: k, val: v}
	}
	return fields, nil
}

// describe names what a node holds, for an error.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// scalar returns the text of a field that must hold one value.
func scalar(f field) (string, string) {
	if f.val.Kind != yaml.ScalarNode || f.val.Tag == "!!null" {
		return "", fmt.Sprintf("%s: want a value, got %s", f.name, describe(f.val))
	}
	return f.val.Value, ""
}

// text returns a non-empty string field.
func text(f field) (string, string) {
	s, bad := scalar(f)
	if bad == "" && s == "" {
		bad = f.name + ": must not be empty"
	}
	return s, bad
}

// integer returns a whole-number field.
func integer(f field) (int, string) {
	s, bad := scalar(f)
	if bad != "" {
		return 0, bad
	}
	var v int
	if f.val.Tag != "!!int" || f.val.Decode(&v) != nil {
		return 0, fmt.Sprintf("%s: want a whole number, got %q", f.name, s)
	}
	return v, ""
}

// float returns a number field.
func float(f field) (float64, string) {
	s, bad := scalar(f)
	if bad != "" {
		return 0, bad
	}
	var v float64
	if (f.val.Tag != "!!int" && f.val.Tag != "!!float") || f.val.Decode(&v) != nil {
		return 0, fmt.Sprintf("%s: want a number, got %q", f.name, s)
	}
	return v, ""
}

// boolean returns a true/false field.
func boolean(f field) (bool, string) {
	s, bad := scalar(f)
	if bad != "" {
		return false, bad
	}
	var v bool
	if f.val.Tag != "!!bool" || f.val.Decode(&v) != nil {
		return false, fmt.Sprintf("%s: want true or false, got %q", f.name, s)
	}
	return v, ""
}

// duration returns a Go duration field: "500ms", "1m", "24h".
func duration(f field) (time.Duration, string) {
	s, bad := scalar(f)
	if bad != "" {
		return 0, bad
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Sprintf("%s: %q is not a duration (a Go duration with its unit: 500ms, 1m, 24h)", f.name, s)
	}
	return d, ""
}

// oneOf returns the value of a field that names one of choices.
func oneOf[T any](f field, choices map[string]T) (T, string) {
	var zero T
	s, bad := scalar(f)
	if bad != "" {
		return zero, bad
	}
	v, ok := choices[s]
	if !ok {
		names := make([]string, 0, len(choices))
		for name := range choices {
			names = append(names, name)
		}
		slices.Sort(names)
		return zero, fmt.Sprintf("%s: %q is none of %s", f.name, s, strings.Join(names, ", "))
	}
	return v, ""
}
