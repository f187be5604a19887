package names

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// TestPackagePlaces keeps docs/design.md's rule for where a package lives: in the narrowest
// internal/ directory that covers every package importing it (tests and the e2e build included).
// A package of internal/ has an importer outside cmd/; one of cmd/internal/ has importers in two
// or more commands (or in cmd/internal/) and none outside cmd/; one used by a single command
// belongs in that command's internal/.
func TestPackagePlaces(t *testing.T) {
	importers, out := moduleImporters(t)
	checked := 0
	for pkg, by := range importers {
		var want string
		switch {
		case strings.HasPrefix(pkg, "internal/"):
			want = "internal/"
		case strings.HasPrefix(pkg, "cmd/internal/"):
			want = "cmd/internal/"
		default:
			continue
		}
		checked++
		if got := place(by); got != want {
			t.Errorf("%s is imported by %s: it belongs under %s", pkg, sortedKeys(by), got)
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages of internal/ and cmd/internal/: is go list's output what this test expects?\n%s", checked, out)
	}
}

const module = "github.com/memifnet/memifnet/"

// moduleImporters maps each package of the module (path without the module prefix) to the
// packages of the module that import it, tests and the e2e build included; out is go list's
// output, for failure messages.
func moduleImporters(t *testing.T) (importers map[string]map[string]bool, out []byte) {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-tags", "e2e",
		"-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}",
		module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	importers = map[string]map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		from := strings.TrimPrefix(f[0], module)
		for _, imp := range f[1:] {
			to, ok := strings.CutPrefix(imp, module)
			if !ok || to == from {
				continue
			}
			if importers[to] == nil {
				importers[to] = map[string]bool{}
			}
			importers[to][from] = true
		}
	}
	return importers, out
}

// place is the narrowest internal/ directory that covers the importers.
func place(by map[string]bool) string {
	commands := map[string]bool{}
	for p := range by {
		rest, ok := strings.CutPrefix(p, "cmd/")
		if !ok {
			return "internal/"
		}
		name, _, _ := strings.Cut(rest, "/")
		commands[name] = true
	}
	if len(commands) == 1 && !commands["internal"] {
		for name := range commands {
			return "cmd/" + name + "/internal/"
		}
	}
	return "cmd/internal/"
}

func sortedKeys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		by   []string
		want string
	}{
		{[]string{"cmd/memif-cni-podinfo"}, "cmd/memif-cni-podinfo/internal/"},
		{[]string{"cmd/memif-cni/internal/plugin", "cmd/memif-cni"}, "cmd/memif-cni/internal/"},
		{[]string{"cmd/memif-cni/internal/plugin", "cmd/memif-deviceplugin/internal/dra"}, "cmd/internal/"},
		{[]string{"cmd/internal/slotwire"}, "cmd/internal/"},
		{[]string{"cmd/memif-cni", "test/hostile"}, "internal/"},
		{[]string{"internal/safefs"}, "internal/"},
	} {
		by := map[string]bool{}
		for _, p := range tc.by {
			by[p] = true
		}
		if got := place(by); got != tc.want {
			t.Errorf("place(%v) = %s, want %s", tc.by, got, tc.want)
		}
	}
}
