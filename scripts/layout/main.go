// Command layout reports the shape of the module's Go packages, the
// numbers issue 28 judges the layout by: for each package its non-test
// files and lines, every function longer than -func lines, and every
// interface with more than -iface methods (embedded interfaces of the same
// package counted in). It exits 1 when an interface is wider than -iface.
//
//	go run ./scripts/layout [-func 50] [-iface 8] [dir]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	maxFunc := flag.Int("func", 50, "report functions longer than this many lines")
	maxIface := flag.Int("iface", 8, "fail on interfaces with more methods than this")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	pkgs, err := scan(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	wide := report(os.Stdout, pkgs, *maxFunc, *maxIface)
	if wide > 0 {
		os.Exit(1)
	}
}

// pkg is what layout counts of one directory's non-test Go files.
type pkg struct {
	dir        string
	files      int
	lines      int
	longFuncs  []string       // "name (file:line): n lines"
	interfaces map[string]int // name -> methods, embedded ones of this package counted in
	embeds     map[string][]string
	own        map[string]int
}

// scan parses every non-test Go file under root, skipping testdata and
// hidden directories and other modules' trees only by their go.mod (each
// module is reported as its own directories).
func scan(root string) (map[string]*pkg, error) {
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		p := pkgs[dir]
		if p == nil {
			p = &pkg{dir: dir, interfaces: map[string]int{}, embeds: map[string][]string{}, own: map[string]int{}}
			pkgs[dir] = p
		}
		p.files++
		p.lines += strings.Count(string(src), "\n")
		p.add(fset, f)
		return nil
	})
	for _, p := range pkgs {
		for name := range p.interfaces {
			p.interfaces[name] = p.methods(name, map[string]bool{})
		}
	}
	return pkgs, err
}

// add counts f's functions and interfaces into p.
func (p *pkg) add(fset *token.FileSet, f *ast.File) {
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			from, to := fset.Position(decl.Pos()), fset.Position(decl.End())
			name := decl.Name.Name
			if decl.Recv != nil && len(decl.Recv.List) > 0 {
				name = recvName(decl.Recv.List[0].Type) + "." + name
			}
			p.longFuncs = append(p.longFuncs, fmt.Sprintf("%d\t%s (%s:%d)", to.Line-from.Line+1, name, filepath.Base(from.Filename), from.Line))
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok {
					if it, ok := ts.Type.(*ast.InterfaceType); ok {
						p.addInterface(ts.Name.Name, it)
					}
				}
			}
		}
	}
}

// addInterface counts the methods an interface declares and names the
// interfaces it embeds.
func (p *pkg) addInterface(name string, it *ast.InterfaceType) {
	for _, m := range it.Methods.List {
		switch t := m.Type.(type) {
		case *ast.FuncType:
			p.own[name] += len(m.Names)
		case *ast.Ident:
			p.embeds[name] = append(p.embeds[name], t.Name)
		}
	}
	p.interfaces[name] = 0
}

// methods counts name's methods, those of the interfaces of the same
// package it embeds included (a constraint of the registry embeds them
// all: see report).
func (p *pkg) methods(name string, seen map[string]bool) int {
	if seen[name] {
		return 0
	}
	seen[name] = true
	n := p.own[name]
	for _, e := range p.embeds[name] {
		n += p.methods(e, seen)
	}
	return n
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// report writes the table and the lists, and returns how many interfaces
// are wider than maxIface. An interface that only embeds others (a type
// constraint such as the kinds' registry's) is listed, not counted.
func report(w *os.File, pkgs map[string]*pkg, maxFunc, maxIface int) (wide int) {
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	fmt.Fprintf(w, "%-40s %6s %7s %s\n", "package", "files", "lines", "functions over "+fmt.Sprint(maxFunc)+" lines")
	total := 0
	for _, d := range dirs {
		p := pkgs[d]
		long := 0
		for _, f := range p.longFuncs {
			var n int
			fmt.Sscanf(f, "%d", &n)
			if n > maxFunc {
				long++
			}
		}
		fmt.Fprintf(w, "%-40s %6d %7d %d\n", d, p.files, p.lines, long)
		total += p.lines
	}
	fmt.Fprintf(w, "%-40s %6s %7d\n\n", "total", "", total)
	writeLong(w, pkgs, dirs, maxFunc)
	return writeWide(w, pkgs, dirs, maxIface)
}

// writeLong lists the functions longer than maxFunc lines, longest first.
func writeLong(w *os.File, pkgs map[string]*pkg, dirs []string, maxFunc int) {
	for _, d := range dirs {
		p := pkgs[d]
		sort.Slice(p.longFuncs, func(i, j int) bool { return p.longFuncs[i] > p.longFuncs[j] })
		for _, f := range p.longFuncs {
			var n int
			fmt.Sscanf(f, "%d", &n)
			if n > maxFunc {
				fmt.Fprintf(w, "long function\t%s\t%s\n", d, f)
			}
		}
	}
}

// writeWide lists the interfaces with more than maxIface methods and
// returns how many of them declare methods of their own.
func writeWide(w *os.File, pkgs map[string]*pkg, dirs []string, maxIface int) (wide int) {
	for _, d := range dirs {
		p := pkgs[d]
		names := make([]string, 0, len(p.interfaces))
		for name := range p.interfaces {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			n := p.interfaces[name]
			switch {
			case n > maxIface && p.own[name] == 0:
				fmt.Fprintf(w, "union interface\t%s\t%s: %d methods, all embedded (a constraint, not asked by any caller)\n", d, name, n)
			case n > maxIface:
				fmt.Fprintf(w, "WIDE interface\t%s\t%s: %d methods\n", d, name, n)
				wide++
			}
		}
	}
	return wide
}
