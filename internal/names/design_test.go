package names_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"testing"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
)

// documented are the constants docs/design.md shows, by the name it gives them.
var documented = map[string]any{
	"names.SocketResource":        names.SocketResource,
	"names.ResourcePrefix":        names.ResourcePrefix,
	"names.DefaultPool":           names.DefaultPool,
	"names.PortsAnnotation":       names.PortsAnnotation,
	"names.LinkLabelPrefix":       names.LinkLabelPrefix,
	"names.PodInfoHelper":         names.PodInfoHelper,
	"names.KubeletDir":            names.KubeletDir,
	"names.PodResourcesSocket":    names.PodResourcesSocket,
	"names.StateDir":              names.StateDir,
	"names.SlotMountSource":       names.SlotMountSource,
	"names.LinkMountSource":       names.LinkMountSource,
	"names.PoolMountSourcePrefix": names.PoolMountSourcePrefix,
	"names.SocketsSubdir":         names.SocketsSubdir,
	"names.LinksSubdir":           names.LinksSubdir,
	"names.StoreSubdir":           names.StoreSubdir,
	"names.PoolsSubdir":           names.PoolsSubdir,
	"names.HostPortsSubdir":       names.HostPortsSubdir,
	"names.DRASubdir":             names.DRASubdir,
	"names.SlotPrefix":            names.SlotPrefix,
	"names.DRASlotPrefix":         names.DRASlotPrefix,
	"names.DRADriver":             names.DRADriver,
	"names.ContainerDir":          names.ContainerDir,
	"names.ContainerPoolsDir":     names.ContainerPoolsDir,
	"names.PortFile":              names.PortFile,
	"names.SocketFile":            names.SocketFile,
	"names.LinkSubdir":            names.LinkSubdir,
	"names.StatusFile":            names.StatusFile,
	"names.DPDKArgsFile":          names.DPDKArgsFile,
	"names.DPDKAppArgsFile":       names.DPDKAppArgsFile,
	"names.VPPFile":               names.VPPFile,
	"names.EnvFile":               names.EnvFile,
	"names.HostEnvSuffix":         names.HostEnvSuffix,
	"names.EnvSockets":            names.EnvSockets,
	"names.EnvPools":              names.EnvPools,
	"names.EnvDir":                names.EnvDir,
	"names.MaxPortNameLen":        names.MaxPortNameLen,
	"names.MaxLinkNameLen":        names.MaxLinkNameLen,
	"names.OrdinalPlaceholder":    names.OrdinalPlaceholder,
	"names.PodIndexLabel":         names.PodIndexLabel,
	"names.MaxQueues":             names.MaxQueues,
	"names.MinRingSize":           names.MinRingSize,
	"names.MaxRingSize":           names.MaxRingSize,
	"names.MinBufferSize":         names.MinBufferSize,
	"names.MaxBufferSize":         names.MaxBufferSize,
	"ports.DefaultMode":           ports.DefaultMode,
	"ports.DefaultQueues":         ports.DefaultQueues,
	"ports.DefaultRingSize":       ports.DefaultRingSize,
	"ports.DefaultBufferSize":     ports.DefaultBufferSize,
}

// TestDesignDoc keeps docs/design.md's tables of names true: every row that names a constant
// ("| what | `names.X` | `value` |") must show its value, and every constant of this package must
// have a row, so the page cannot drift from the code it describes.
func TestDesignDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\|[^|]*\\| `((?:names|ports|portspec)\\.\\w+)` \\| `([^`]*)` \\|$")
	shown := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		name, value := m[1], m[2]
		v, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("docs/design.md shows %s, which this test does not know: add it to documented", name)
		case fmt.Sprint(v) != value:
			t.Errorf("docs/design.md shows %s = %q; the code says %q", name, value, fmt.Sprint(v))
		}
		shown[name] = true
	}
	for name := range documented {
		if !shown[name] {
			t.Errorf("docs/design.md has no row for %s", name)
		}
	}
	// Every exported constant of package names is documented (and so shown).
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "names.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			for _, id := range spec.(*ast.ValueSpec).Names {
				if id.IsExported() && documented["names."+id.Name] == nil {
					t.Errorf("constant names.%s is not in docs/design.md (and not in documented)", id.Name)
				}
			}
		}
	}
}
