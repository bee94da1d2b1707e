package rules

import (
	"errors"
	"strconv"
)

// Errors of this package, matched with errors.Is. The returned error's
// message says what exactly was wrong, and where.
var (
	// ErrInvalid means a rules file cannot be used: it is not YAML, it is
	// empty, it has an unknown field, a duplicate rule name or override
	// key, a value of the wrong type, a bad duration, a field its rule's
	// kind does not take, an unknown kind or time zone, or a rule the
	// library would reject (those errors also wrap
	// [ratelimit.ErrInvalidRule]). [Watch] also returns it for invalid
	// [WatchOptions].
	ErrInvalid = errors.New("rules: invalid rules")
	// ErrMissingRule means a file lacks a rule that [WatchOptions].Require
	// names.
	ErrMissingRule = errors.New("rules: required rule missing")
)

// fileError is an error at one place of a rules file. It wraps ErrInvalid
// and, when the library rejected a rule, the library's error.
type fileError struct {
	pos   string // "rules.yaml:12: rule \"coupon\"", "line 12", ...
	msg   string
	cause error // the library's error, or nil
}

func (e *fileError) Error() string { return e.pos + ": " + e.msg }

// Unwrap returns ErrInvalid and the library's error, if any.
func (e *fileError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrInvalid, e.cause}
	}
	return []error{ErrInvalid}
}

// position writes where an error is: the file (for Load) and the line,
// then the rule and the override when there is one.
func position(file string, line int, rule, override string) string {
	var b []byte
	if file != "" {
		b = append(b, file...)
		b = append(b, ':')
		if line > 0 {
			b = strconv.AppendInt(b, int64(line), 10)
		}
	} else if line > 0 {
		b = append(b, "line "...)
		b = strconv.AppendInt(b, int64(line), 10)
	}
	if len(b) > 0 && b[len(b)-1] == ':' {
		b = b[:len(b)-1]
	}
	if rule != "" {
		if len(b) > 0 {
			b = append(b, ": "...)
		}
		b = append(b, rule...)
	}
	if override != "" {
		b = append(b, ": override "...)
		b = strconv.AppendQuote(b, override)
	}
	if len(b) == 0 {
		return "rules"
	}
	return string(b)
}
