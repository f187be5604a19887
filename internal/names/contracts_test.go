package names

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestContractsSpelledOnce keeps the second half of docs/design.md's placement rule: what one
// binary writes and another reads is a contract, spelled once in internal/names, a contract
// package under cmd/internal or a pkg/memif leaf. Its mechanical trace is a string constant
// with the same value in two commands' own trees (cmd/<a>/... and cmd/<b>/...): the writer's
// spelling and the reader's copy. Such a constant moves to a contract package, which both
// import; a value two commands share by coincidence, not as a contract, goes in coincidences.
func TestContractsSpelledOnce(t *testing.T) {
	coincidences := map[string]bool{
		// kubectl-memifnet's explain names its own findings LinkUp and LinkDown; the DRA
		// driver's LinkReady condition has reasons of those names. kubectl does not read them.
		"LinkUp": true, "LinkDown": true,
	}
	where := map[string]map[string][]string{} // value -> command -> declarations
	err := filepath.WalkDir("../../cmd", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		command := strings.Split(rel, "/")[1]
		if command == "internal" {
			return nil // the contract packages themselves
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING || i >= len(vs.Names) {
						continue
					}
					s, _ := strconv.Unquote(lit.Value)
					if len(s) < 4 {
						continue
					}
					if where[s] == nil {
						where[s] = map[string][]string{}
					}
					where[s][command] = append(where[s][command], rel+": "+vs.Names[i].Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(where) < 50 {
		t.Fatalf("found only %d string constants under cmd/: is the walk still looking at the commands?", len(where))
	}
	for s, by := range where {
		if len(by) < 2 || coincidences[s] {
			continue
		}
		var decls []string
		for _, ds := range by {
			decls = append(decls, ds...)
		}
		sort.Strings(decls)
		t.Errorf("%q is spelled in %d commands (%s): a contract between them lives in internal/names, cmd/internal or a pkg/memif leaf", s, len(by), strings.Join(decls, ", "))
	}
}
