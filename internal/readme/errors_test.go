package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestREADMEErrors requires the list of errors (the one paragraph of
// README.md and docs/*.md that says errors "match sentinels with
// `errors.Is`"; docs/semantics.md holds it) to name every exported Err
// variable of the core's errors.go.
func TestREADMEErrors(t *testing.T) {
	files, err := Markdown("../..")
	if err != nil {
		t.Fatal(err)
	}
	var list, where string
	for _, file := range files {
		markdown, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, para := range strings.Split(string(markdown), "\n\n") {
			if !strings.Contains(para, "match sentinels with `errors.Is`") {
				continue
			}
			if list != "" {
				t.Fatalf("both %s and %s have a paragraph that lists the errors (\"match sentinels with `errors.Is`\"): keep one list", where, displayName("../..", file))
			}
			list, where = para, displayName("../..", file)
		}
	}
	if list == "" {
		t.Fatal("neither README.md nor docs/*.md has a paragraph that lists the errors (\"match sentinels with `errors.Is`\")")
	}
	f, err := parser.ParseFile(token.NewFileSet(), "../../errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				if !name.IsExported() || !strings.HasPrefix(name.Name, "Err") {
					continue
				}
				n++
				if !strings.Contains(list, "`"+name.Name+"`") {
					t.Errorf("%s's list of errors does not name %s", where, name.Name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("errors.go declares no exported Err variable: the test checks nothing")
	}
}
