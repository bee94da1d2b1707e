// Package script composes the library's Lua scripts from pieces and runs
// them on Redis: EVALSHA by the name Redis gave the text, EVAL when the
// server does not have it, and the "#!lua" first line that makes Redis 7
// refuse a script that adds state at maxmemory, dropped for servers that
// take none.
//
// # Composing
//
// The pieces are text/template files (the library's lua/ directory, which
// it embeds and passes to Parse) whose pieces are named templates,
// {{define "name"}} ... {{end}}, in Lua; a file's header (the text outside
// its pieces) documents them and is never put in a script. A piece puts
// another in with {{template "name" x}}; x is either a Lua expression as a
// string (the key to read, the µs to keep, the time now is read from) or
// the script's Variant. {{kind "piece" .}} puts in the piece of the
// variant's kind, <kind>.piece (sliding.count for a sliding log), so a
// script never asks at run time what kind it decides, and
// {{if has "piece" .}} asks whether the kind has one; {{if .Penalty}}
// leaves the ladder out of a rule without one. Pieces share locals by
// name. The result is one flat body per variant: pieces are text, not
// functions, because every function a script defines costs Redis a
// closure on every call (about 770 instructions); a script defines only a
// function it calls more than once a call. Blank lines are dropped.
package script

import (
	"io/fs"
	"strings"
	"text/template"
)

// Variant is what one composition of a script is for: the kind of its
// meter (the name of its pieces, as "sliding" for sliding.lua's), whether
// the rule has a penalty, whether the decision is one of a group's (it
// records nothing itself) and which (Index, from 1), whether an allowing
// call keeps a record of what it took (Reserve: see lua/allow.lua), the Lua expressions
// of the arguments the decision reads as its kind's two numbers (Second,
// Fifth) and of the index of the penalty's first; for a group's script,
// its rules' variants and one of each kind among them (Preludes).
type Variant struct {
	Kind                     string
	Penalty                  bool
	Group                    bool
	Index                    int
	Reserve                  bool
	Second, Fifth, PenaltyAt string
	Rules, Preludes          []Variant
}

// Pieces are the parsed pieces of a set of scripts.
type Pieces struct{ t *template.Template }

// MustParse parses the files of fsys that match pattern into Pieces, with
// the functions the pieces use: kind (the variant's kind's piece) and has
// (whether the kind has that piece). It panics on a malformed file: the
// pieces are the program's own.
func MustParse(fsys fs.FS, pattern string) *Pieces {
	t := template.New("lua")
	t.Funcs(template.FuncMap{
		"kind": func(piece string, v Variant) (string, error) {
			var b strings.Builder
			err := t.ExecuteTemplate(&b, v.Kind+"."+piece, v)
			return b.String(), err
		},
		"has": func(piece string, v Variant) bool { return t.Lookup(v.Kind+"."+piece) != nil },
	})
	return &Pieces{t: template.Must(t.ParseFS(fsys, pattern))}
}

// Has reports whether the pieces hold kind's piece, <kind>.piece.
func (p *Pieces) Has(kind, piece string) bool { return p.t.Lookup(kind+"."+piece) != nil }

// Compose returns the script of entry for v: the flat body, without its
// blank lines, each line indented anew by the blocks it is in (a piece's
// lines are indented as in its file, wherever it is put). No piece holds a
// string that spans lines, so only whitespace outside strings changes. It
// panics when entry cannot be composed for v: the pieces are the program's
// own.
func (p *Pieces) Compose(entry string, v Variant) string {
	var b strings.Builder
	if err := p.t.ExecuteTemplate(&b, entry, v); err != nil {
		panic("ratelimit: composing " + entry + ": " + err.Error())
	}
	var out strings.Builder
	depth := 0
	for _, l := range strings.Split(b.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		first, _, _ := strings.Cut(l, " ")
		opens := strings.HasSuffix(l, " then") || strings.HasSuffix(l, " do") || first == "do" ||
			strings.HasSuffix(l, ")") && strings.Contains(l, "function ") || first == "else"
		if first == "end" || first == "else" || first == "elseif" {
			depth--
		}
		out.WriteString(strings.Repeat("  ", max(depth, 0)) + l + "\n")
		if opens || first == "elseif" {
			depth++
		}
	}
	return out.String()
}
