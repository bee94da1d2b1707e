package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADME compiles the blocks of README.md and docs/*.md that belong to
// the core (see the package documentation for the convention); grpclimit,
// otel and rules compile theirs in their own TestREADME.
func TestREADME(t *testing.T) {
	if err := Check("../..", "."); err != nil {
		t.Fatal(err)
	}
}

// TestCheckNothing refuses Markdown files without a Go block of the
// module: a test that compiles nothing fails.
func TestCheckNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, md := range map[string]string{"README.md": "# x\n\n```sh\nls\n```\n", "docs/a.md": "# a\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Check(dir, "."); err == nil || !strings.Contains(err.Error(), "checks nothing") {
		t.Errorf("Check of files without Go blocks = %v; want an error that says the test checks nothing", err)
	}
}

// TestREADMEModules requires every block of README.md and docs/*.md to
// belong to a module whose TestREADME compiles it, and each such module to
// have a block.
func TestREADMEModules(t *testing.T) {
	files, err := Markdown("../..")
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{".": true, "grpclimit": true, "otel": true, "rules": true}
	count := map[string]int{}
	for _, file := range files {
		markdown, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range Blocks(displayName("../..", file), markdown) {
			mod, err := b.Module()
			if err != nil {
				t.Fatal(err)
			}
			if !tested[mod] {
				t.Errorf("%s:%d: the block belongs to module %s, whose tests do not compile the Markdown blocks", b.File, b.Line, mod)
			}
			count[mod]++
		}
	}
	for mod := range tested {
		if count[mod] == 0 {
			t.Errorf("neither README.md nor docs/*.md has a Go block for module %s", mod)
		}
	}
}

// TestMarkdown lists README.md first, then every guide of docs/, and
// refuses a tree without guides.
func TestMarkdown(t *testing.T) {
	files, err := Markdown("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 || files[0] != filepath.Join("../..", "README.md") {
		t.Fatalf("Markdown = %q; want README.md, then the guides", files)
	}
	for _, f := range files[1:] {
		if filepath.Dir(f) != filepath.Join("../..", "docs") || filepath.Ext(f) != ".md" {
			t.Errorf("Markdown lists %s, which is no guide of docs/", f)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if files, err := Markdown(dir); err == nil {
		t.Errorf("Markdown of a tree without docs/ = %q, nil; want an error", files)
	}
}

// TestBlocks reads the blocks of a Markdown file: their first line, their
// code, and whether each is a whole file.
func TestBlocks(t *testing.T) {
	md := "# x\n\n```go\nfmt.Println(1)\n```\n\n```sh\nls\n```\n\n```go\npackage main\n\nfunc main() {}\n```\n"
	blocks := Blocks("x.md", []byte(md))
	if len(blocks) != 2 {
		t.Fatalf("got %d blocks, want 2: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.File != "x.md" || b.Line != 4 || b.Code != "fmt.Println(1)\n" || b.IsFile() {
		t.Errorf("first block: %+v, file %v; want x.md, line 4, a fragment", b, b.IsFile())
	}
	if b := blocks[1]; b.Line != 12 || !b.IsFile() {
		t.Errorf("second block: %+v, file %v; want line 12, a whole file", b, b.IsFile())
	}
	if sh := Fenced("x.md", []byte(md), "sh"); len(sh) != 1 || sh[0].Line != 8 || sh[0].Code != "ls\n" {
		t.Errorf("the sh blocks: %+v; want one, at line 8", sh)
	}
}

// TestModule finds the module of a block from the packages it uses.
func TestModule(t *testing.T) {
	for _, c := range []struct {
		code, want string
	}{
		{"lim, _ := ratelimit.New(nil, ratelimit.Options{})\n_ = lim\n", "."},
		{"_ = grpclimit.Methods{}\n", "grpclimit"},
		{"m, _ := ratelimitotel.New(ratelimitotel.Options{MeterProvider: provider})\n_ = m\n", "otel"},
		{"package main\n\nimport _ \"github.com/ratelimit-go/ratelimit/otel\"\n", "otel"},
		{"package main\n\nimport _ \"github.com/ratelimit-go/ratelimit/httplimit\"\n", "."},
	} {
		got, err := Block{Line: 1, Code: c.code}.Module()
		if err != nil || got != c.want {
			t.Errorf("Module of %q = %q, %v; want %q", c.code, got, err, c.want)
		}
	}
	if _, err := (Block{Line: 7, Code: "_ = grpclimit.Methods{}\n_ = ratelimitotel.Options{}\n"}).Module(); err == nil {
		t.Error("a block that uses packages of two modules has a module")
	}
}

// TestUndeclaredName refuses a fragment whose free name is in no table,
// naming its file and line.
func TestUndeclaredName(t *testing.T) {
	_, err := Block{File: "docs/x.md", Line: 42, Code: "lim.Allow(ctx, rule, someKey)\n"}.Source("docs/x.md", "p", "f")
	if err == nil || !strings.Contains(err.Error(), "docs/x.md:42") || !strings.Contains(err.Error(), `"someKey"`) {
		t.Errorf("err = %v; want one naming docs/x.md:42 and someKey", err)
	}
}

// TestCompileReportsLine compiles a Markdown file with a block that
// compiles and one that does not: the error names the broken line of the
// Markdown file, and a file of good blocks compiles.
func TestCompileReportsLine(t *testing.T) {
	dir := t.TempDir()
	good := "```go\nres, err := lim.Allow(ctx, rule, userID)\nif err != nil {\n\treturn err\n}\n_ = res.Allowed\n```\n"
	bad := "```go\nlim.Allow(ctx, rule)\n```\n"
	md := filepath.Join(dir, "README.md")
	if err := os.WriteFile(md, []byte(good+"\n"+bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Compile("../..", ".", md)
	if err == nil || !strings.Contains(err.Error(), "README.md:10") || strings.Contains(err.Error(), "README.md:2:") {
		t.Fatalf("err = %v; want a compile error at README.md:10 only", err)
	}
	if err := os.WriteFile(md, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := Compile("../..", ".", md); n != 1 || err != nil {
		t.Fatalf("Compile of a good block = %d, %v; want 1, nil", n, err)
	}
}

// TestCompileSeveralFiles compiles the blocks of two Markdown files in one
// build: blocks on the same line of both are kept apart, and an error names
// the file and line it is in.
func TestCompileSeveralFiles(t *testing.T) {
	dir := t.TempDir()
	good := "```go\nres, err := lim.Allow(ctx, rule, userID)\nif err != nil {\n\treturn err\n}\n_ = res.Allowed\n```\n"
	file := "```go\npackage main\n\nimport \"github.com/ratelimit-go/ratelimit\"\n\nfunc main() { _ = ratelimit.PerSecond(1) }\n```\n"
	one, two := filepath.Join(dir, "one.md"), filepath.Join(dir, "two.md")
	for path, md := range map[string]string{one: good + "\n" + file, two: good + "\n" + file} {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Compile("../..", ".", one, two); n != 4 || err != nil {
		t.Fatalf("Compile of two files of two good blocks each = %d, %v; want 4, nil", n, err)
	}
	if after, err := os.ReadDir("../.."); err != nil || len(after) != len(before) {
		t.Errorf("the repository's root held %d entries before the build and %d after (%v)", len(before), len(after), err)
	}
	if err := os.WriteFile(two, []byte(good+"\n```go\nlim.Allow(ctx, rule)\n```\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Compile("../..", ".", one, two)
	if err == nil || !strings.Contains(err.Error(), "two.md:10") || strings.Contains(err.Error(), "one.md:") {
		t.Fatalf("err = %v; want a compile error at two.md:10 only", err)
	}
}

// TestCompileWholeFile compiles a block that is a whole command: its
// binary is never written into the source tree.
func TestCompileWholeFile(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "README.md")
	file := "```go\npackage main\n\nimport \"github.com/ratelimit-go/ratelimit\"\n\nfunc main() { _ = ratelimit.PerSecond(1) }\n```\n"
	if err := os.WriteFile(md, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Compile("../..", ".", md); n != 1 || err != nil {
		t.Fatalf("Compile of a whole file = %d, %v; want 1, nil", n, err)
	}
	after, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the repository's root held %d entries before the build and %d after", len(before), len(after))
	}
	broken := strings.Replace(file, "PerSecond(1)", "PerSecond()", 1)
	if err := os.WriteFile(md, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile("../..", ".", md); err == nil || !strings.Contains(err.Error(), "README.md:6") {
		t.Errorf("err = %v; want a compile error at README.md:6", err)
	}
}
