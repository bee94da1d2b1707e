// Package readme checks that the Go code in the repository's README.md and
// in its guides, docs/*.md (see [Markdown]), compiles as a user writes it:
// every ```go block, in the module whose packages it uses.
//
// # The convention
//
// A block whose first line of code starts with "package" is a whole file:
// it is compiled as it stands, in a package of its own.
//
// Any other block is a fragment: statements, compiled as the body of a
// function that returns an error (so a fragment may `return err`; a
// `return nil` follows it). Each name a fragment uses without declaring it
// (a free name) must be either a package name in [Packages], which is
// imported under that name, or a name in [Free], which becomes a parameter
// of the function with the type written there: ctx is a context.Context, w
// an http.ResponseWriter, lim a *ratelimit.Limiter, and so on. A free name
// in neither table fails the check, naming the block's line; so does a
// block that does not compile. What a fragment declares it must use, as in
// any Go function, and a name declared in one block is not seen by the
// next: each block stands alone.
//
// A block belongs to the module of the packages it uses: blocks that use
// package grpclimit compile in grpclimit/, those that use ratelimitotel in
// otel/, those that use rules in rules/, every other in the core. Each
// module's test compiles its own blocks, of every file, in one
// `go build -overlay` (see [Check]), so nothing is written into the source
// tree, and compile errors point at the Markdown files' own lines.
package readme

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// core is the module path of the core; the other modules live under it.
const core = "github.com/ratelimit-go/ratelimit"

// Packages maps each package name a fragment may use without importing it
// to its import path.
var Packages = map[string]string{
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"http":     "net/http",
	"httptest": "net/http/httptest",
	"log":      "log",
	"math":     "math",
	"net":      "net",
	"netip":    "net/netip",
	"os":       "os",
	"slog":     "log/slog",
	"strconv":  "strconv",
	"testing":  "testing",
	"time":     "time",

	"grpc":    "google.golang.org/grpc",
	"metric":  "go.opentelemetry.io/otel/metric",
	"rueidis": "github.com/redis/rueidis",

	"ratelimit":     core,
	"grpclimit":     core + "/grpclimit",
	"httplimit":     core + "/httplimit",
	"policy":        core + "/policy",
	"ratelimitotel": core + "/otel",
	"ratelimittest": core + "/ratelimittest",
	"rules":         core + "/rules",
}

// Free maps each name a fragment may use without declaring it to its type:
// what the surrounding code of a user's program would hold under that name.
var Free = map[string]string{
	"ctx":    "context.Context",
	"w":      "http.ResponseWriter",
	"r":      "*http.Request",
	"t":      "*testing.T",
	"userID": "string",

	"lim":       "*ratelimit.Limiter",
	"rule":      "ratelimit.Rule",
	"coupon":    "ratelimit.Rule",
	"tokens":    "ratelimit.Rule",
	"page":      "ratelimit.Rule",
	"clientOpt": "rueidis.ClientOption",
	"runExport": "func(context.Context) error",
	"prompt":    "string",
	"complete":  "func(ctx context.Context, prompt string, maxTokens int) (answer string, tokens int, err error)",

	"mux":             "*http.ServeMux",
	"next":            "http.Handler",
	"orders":          "http.Handler",
	"claimCoupon":     "http.Handler",
	"merchant":        "http.Handler",
	"userFromSession": "func(*http.Request) (string, bool)",
	"user":            "httplimit.KeyFunc",

	"userFromContext": "func(context.Context) (string, bool)",
	"lbs":             "[]netip.Prefix",
	"listener":        "net.Listener",

	"provider": "metric.MeterProvider",
}

// modules are the modules other than the core, by directory, each with the
// import path of its packages.
var modules = map[string]string{
	"grpclimit":  core + "/grpclimit",
	"otel":       core + "/otel",
	"benchmarks": core + "/benchmarks",
	"rules":      core + "/rules",
}

// Markdown returns the Markdown files whose blocks are checked, each joined
// to root (the repository's root): README.md, then the guides docs/*.md in
// the order of their names. A repository without README.md, or without a
// guide, is an error, so that a test never checks fewer files than there
// are without saying so.
func Markdown(root string) ([]string, error) {
	readme := filepath.Join(root, "README.md")
	if _, err := os.Stat(readme); err != nil {
		return nil, err
	}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	if len(guides) == 0 {
		return nil, fmt.Errorf("no guide in %s", filepath.Join(root, "docs"))
	}
	sort.Strings(guides)
	return append([]string{readme}, guides...), nil
}

// Block is one fenced block of a Markdown file.
type Block struct {
	// File names the Markdown file in messages, such as "README.md" or
	// "docs/fallback.md".
	File string
	// Line is the line of the Markdown file that holds the block's first
	// line of code.
	Line int
	// Code is the block's text.
	Code string
}

// Blocks returns the ```go blocks of a Markdown file, in order; file names
// the file in messages.
func Blocks(file string, markdown []byte) []Block {
	return Fenced(file, markdown, "go")
}

// Fenced returns the blocks of a Markdown file fenced as ```lang, in order;
// file names the file in messages.
func Fenced(file string, markdown []byte, lang string) []Block {
	var (
		blocks []Block
		cur    *Block
		code   strings.Builder
		n      int
	)
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	sc.Buffer(nil, len(markdown)+1)
	for sc.Scan() {
		n++
		line := sc.Text()
		fence := strings.TrimSpace(line)
		switch {
		case cur == nil && fence == "```"+lang:
			cur = &Block{File: file, Line: n + 1}
			code.Reset()
		case cur != nil && fence == "```":
			cur.Code = code.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			code.WriteString(line)
			code.WriteByte('\n')
		}
	}
	return blocks
}

// IsFile reports whether the block is a whole file rather than a fragment.
func (b Block) IsFile() bool {
	return strings.HasPrefix(strings.TrimSpace(b.Code), "package ")
}

// Module returns the directory of the module the block compiles in,
// relative to the repository's root: "." for the core, or "grpclimit",
// "otel", "benchmarks".
func (b Block) Module() (string, error) {
	paths, err := b.imports()
	if err != nil {
		return "", err
	}
	mod := "."
	for _, p := range paths {
		for dir, prefix := range modules {
			if p != prefix && !strings.HasPrefix(p, prefix+"/") {
				continue
			}
			if mod != "." && mod != dir {
				return "", fmt.Errorf("%s:%d: the block uses packages of two modules, %s and %s", b.File, b.Line, mod, dir)
			}
			mod = dir
		}
	}
	return mod, nil
}

// imports returns the import paths the block needs.
func (b Block) imports() ([]string, error) {
	if b.IsFile() {
		f, err := parser.ParseFile(token.NewFileSet(), "", b.Code, parser.ImportsOnly)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", b.File, b.Line, err)
		}
		var paths []string
		for _, s := range f.Imports {
			paths = append(paths, strings.Trim(s.Path.Value, "`\""))
		}
		return paths, nil
	}
	_, pkgs, err := b.free()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, name := range pkgs {
		paths = append(paths, Packages[name])
	}
	return paths, nil
}

// free returns a fragment's free names that are parameters (sorted), and
// the packages it and those parameters' types use (sorted).
func (b Block) free() (params, pkgs []string, err error) {
	src := "package p\nfunc _() {\n" + b.Code + "\n}\n"
	f, err := parser.ParseFile(token.NewFileSet(), "", src, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s:%d: the fragment does not parse as statements: %v", b.File, b.Line, err)
	}
	seenParam := map[string]bool{}
	seenPkg := map[string]bool{}
	for _, id := range f.Unresolved {
		name := id.Name
		switch {
		case Packages[name] != "":
			seenPkg[name] = true
		case Free[name] != "":
			seenParam[name] = true
		case types.Universe.Lookup(name) != nil:
		default:
			return nil, nil, fmt.Errorf("%s:%d: free name %q is neither declared in the block nor one of readme.Free's names or readme.Packages' packages", b.File, b.Line, name)
		}
	}
	for name := range seenParam {
		params = append(params, name)
		for _, pkg := range typePackages(Free[name]) {
			seenPkg[pkg] = true
		}
	}
	for name := range seenPkg {
		pkgs = append(pkgs, name)
	}
	sort.Strings(params)
	sort.Strings(pkgs)
	return params, pkgs, nil
}

// typePackages returns the package names a type expression of Free uses.
func typePackages(typ string) []string {
	expr, err := parser.ParseExpr(typ)
	if err != nil {
		panic(fmt.Sprintf("readme.Free: type %q does not parse: %v", typ, err))
	}
	var pkgs []string
	ast.Inspect(expr, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				pkgs = append(pkgs, id.Name)
			}
		}
		return true
	})
	return pkgs
}

// Source returns the Go file that compiles the block: the block itself
// when it is a whole file, or a function named fn in package pkg that
// holds the fragment. Line directives map its lines to the block's lines
// in the file named readme.
func (b Block) Source(readme, pkg, fn string) ([]byte, error) {
	var buf bytes.Buffer
	if b.IsFile() {
		fmt.Fprintf(&buf, "//line %s:%d\n%s", readme, b.Line, b.Code)
		return buf.Bytes(), nil
	}
	params, pkgs, err := b.free()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&buf, "package %s\n\nimport (\n", pkg)
	for _, name := range pkgs {
		fmt.Fprintf(&buf, "\t%s %q\n", name, Packages[name])
	}
	fmt.Fprintf(&buf, ")\n\nfunc %s(", fn)
	for i, name := range params {
		if i > 0 {
			buf.WriteString(", ")
		}
		fmt.Fprintf(&buf, "%s %s", name, Free[name])
	}
	fmt.Fprintf(&buf, ") error {\n//line %s:%d\n%s\treturn nil\n}\n", readme, b.Line, b.Code)
	return buf.Bytes(), nil
}

// Compile compiles the Go blocks of the Markdown files (paths, such as
// [Markdown] returns) that belong to the module in directory dir (root is
// the repository's root, which holds the core), all in one build, and
// returns how many it compiled. The error holds the compiler's messages,
// at the Markdown files' lines, or says why a block could not be prepared.
// In a build with the race detector it builds with it too, so that a test
// reuses the dependencies compiled for it.
func Compile(root, dir string, files ...string) (int, error) {
	modDir, err := filepath.Abs(filepath.Join(root, dir))
	if err != nil {
		return 0, err
	}
	overlayDir, err := os.MkdirTemp("", "readme-blocks-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(overlayDir)
	set := blockSet{replace: map[string]string{}}
	for i, file := range files {
		if err := set.add(root, dir, modDir, overlayDir, i, file); err != nil {
			return 0, err
		}
	}
	if len(set.replace) == 0 {
		return 0, nil
	}
	if out, err := set.build(modDir, overlayDir); out != nil {
		return 0, fmt.Errorf("the Go blocks for module %s (of %d Markdown files) do not compile (%v):\n%s", dir, len(files), err, out)
	} else if err != nil {
		return 0, err
	}
	return len(set.replace), nil
}

// blockSet is the Go blocks of one module gathered for one build: the
// overlay that places each block's source in the module (replace: the
// path it takes in the module's directory, to its file in the overlay's
// directory), the packages to build, and whether one is a command.
type blockSet struct {
	replace   map[string]string
	pkgs      []string
	fragments bool
	hasMain   bool
}

// add writes the blocks of the Markdown file (the index-th of the build)
// that belong to the module in directory dir (modDir, absolute) into
// overlayDir, and adds them to the set.
func (s *blockSet) add(root, dir, modDir, overlayDir string, index int, file string) error {
	markdown, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	absFile, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	for _, b := range Blocks(displayName(root, file), markdown) {
		mod, err := b.Module()
		if err != nil {
			return err
		}
		if mod != dir {
			continue
		}
		// Fragments share one package, one function each; whole files
		// get a package each. The directories exist only in the
		// overlay; the file's index keeps the names of blocks on the
		// same line of two files apart.
		pkgDir, name := "zz_readme_blocks", fmt.Sprintf("block_file%d_line%d.go", index, b.Line)
		if b.IsFile() {
			pkgDir = fmt.Sprintf("zz_readme_file%d_line%d", index, b.Line)
			s.pkgs = append(s.pkgs, "./"+pkgDir)
			s.hasMain = s.hasMain || strings.HasPrefix(strings.TrimSpace(b.Code), "package main\n")
		} else if !s.fragments {
			s.fragments = true
			s.pkgs = append(s.pkgs, "./zz_readme_blocks")
		}
		src, err := b.Source(absFile, "zz_readme_blocks", fmt.Sprintf("blockFile%dLine%d", index, b.Line))
		if err != nil {
			return err
		}
		tmp := filepath.Join(overlayDir, fmt.Sprintf("%s_%s", pkgDir, name))
		if err := os.WriteFile(tmp, src, 0o644); err != nil {
			return err
		}
		s.replace[filepath.Join(modDir, pkgDir, name)] = tmp
	}
	return nil
}

// build builds the set's packages in modDir with its overlay. When they do
// not compile it returns the compiler's messages (out) and the command's
// error; an error with no messages says the build could not be run.
func (s *blockSet) build(modDir, overlayDir string) (out []byte, err error) {
	overlay := filepath.Join(overlayDir, "overlay.json")
	if err := writeOverlay(overlay, s.replace); err != nil {
		return nil, err
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("finding the go command: %w", err)
	}
	args := []string{"build", "-overlay", overlay}
	if s.hasMain && len(s.pkgs) == 1 {
		// A lone command's binary goes to the temporary directory, never
		// into the source tree. (Several packages are built and discarded;
		// with -o, go build would build only the commands among them.)
		args = append(args, "-o", filepath.Join(overlayDir, "bin")+string(filepath.Separator))
	}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goCmd, append(args, s.pkgs...)...)
	cmd.Dir = modDir
	if out, err := cmd.CombinedOutput(); err != nil {
		if out == nil {
			out = []byte{}
		}
		return out, err
	}
	return nil, nil
}

// Check compiles the Go blocks of README.md and docs/*.md (see [Markdown])
// that belong to the module in directory dir, as [Compile] does, and is an
// error when none does: a test that checks nothing must not pass.
func Check(root, dir string) error {
	files, err := Markdown(root)
	if err != nil {
		return err
	}
	n, err := Compile(root, dir, files...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no Go block of %s belongs to module %s: the test checks nothing", strings.Join(files, ", "), dir)
	}
	return nil
}

// displayName names a Markdown file in messages: its path from root when
// it lies below root, such as "docs/fallback.md", or else its base name.
func displayName(root, file string) string {
	absRoot, err1 := filepath.Abs(root)
	absFile, err2 := filepath.Abs(file)
	if err1 == nil && err2 == nil {
		if rel, err := filepath.Rel(absRoot, absFile); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.Base(file)
}

// writeOverlay writes the -overlay file of go build: each path of the
// source tree named in replace is read from the file it maps to.
func writeOverlay(path string, replace map[string]string) error {
	b, err := json.Marshal(struct{ Replace map[string]string }{replace})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
