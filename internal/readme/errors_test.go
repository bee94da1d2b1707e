package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestREADMEErrors requires README.md's list of errors (the paragraph that
// says errors "match sentinels with `errors.Is`") to name every exported
// Err variable of the core's errors.go.
func TestREADMEErrors(t *testing.T) {
	markdown, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var list string
	for _, para := range strings.Split(string(markdown), "\n\n") {
		if strings.Contains(para, "match sentinels with `errors.Is`") {
			list = para
		}
	}
	if list == "" {
		t.Fatal("README.md has no paragraph that lists the errors (\"match sentinels with `errors.Is`\")")
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
					t.Errorf("README.md's list of errors does not name %s", name.Name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("errors.go declares no exported Err variable: the test checks nothing")
	}
}
