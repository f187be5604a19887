package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/cmd/internal/linkdir"
)

func TestParseGood(t *testing.T) {
	c, err := Parse([]byte(`
socketSlots: 1024
pools:
  - name: hugepool
    pageSize: 2Mi
    unitSize: 64Mi
    unitsPerNUMANode: 4
  - name: big
    pageSize: 1Gi
    unitSize: 2Gi
    unitsPerNUMANode: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.SocketSlots != 1024 || len(c.Pools) != 2 {
		t.Fatalf("got %+v", c)
	}
	if c.Pools[0].UnitSize.Bytes != 64<<20 || c.Pools[1].PageSize.Bytes != 1<<30 || c.Pools[1].UnitSize.Bytes != 2<<30 {
		t.Fatalf("sizes: %+v", c.Pools)
	}
}

func TestParseDRA(t *testing.T) {
	c, err := Parse([]byte(`
socketSlots: 8
dra:
  enabled: true
  socketSlots: 4
  pools:
    - name: drapool
      pageSize: 2Mi
      unitSize: 4Mi
      unitsPerNUMANode: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.DRA.Enabled || c.DRA.SocketSlots != 4 || c.DRA.Driver() != "memifnet.io" || c.DRA.Pools[0].UnitSize.Bytes != 4<<20 {
		t.Fatalf("got %+v", c.DRA)
	}
	if l := c.DRA.Links(); l != linkdir.DefaultLimits {
		t.Errorf("default link limits %+v, want linkdir.DefaultLimits", l)
	}
	c, err = Parse([]byte("dra:\n  enabled: true\n  socketSlots: 2\n  linkLimits: {size: 128Ki}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.DRA.Links(); l.Size != 128<<10 || l.Inodes != linkdir.DefaultLimits.Inodes {
		t.Errorf("link limits %+v, want 128Ki and the default inodes", l)
	}
	// A disabled section is not checked: it may be filled in ahead of enabling it.
	if _, err := Parse([]byte("dra:\n  socketSlots: -1\n")); err != nil {
		t.Errorf("disabled dra section: %v", err)
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBadConfigsNameTheKey(t *testing.T) {
	pool := func(extra string) string {
		return "pools:\n  - name: hugepool\n    pageSize: 2Mi\n    unitSize: 64Mi\n    unitsPerNUMANode: 4\n" + extra
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown top key", "socketSlots: 4\nsocketSlot: 5\n", `"socketSlot"`},
		{"unknown pool key", pool("    numa: 1\n"), `"numa"`},
		{"slots type", "socketSlots: many\n", "socketSlots"},
		{"slots negative", "socketSlots: -1\n", "socketSlots"},
		{"slots too many", "socketSlots: 100000\n", "socketSlots"},
		{"page size", "pools:\n  - name: p\n    pageSize: 4Ki\n    unitSize: 64Mi\n", "pools[0].pageSize"},
		{"page size text", "pools:\n  - name: p\n    pageSize: 2MB\n    unitSize: 64Mi\n", "2MB"},
		{"unit size missing", "pools:\n  - name: p\n    pageSize: 2Mi\n", "pools[0].unitSize"},
		{"unit not multiple", "pools:\n  - name: p\n    pageSize: 1Gi\n    unitSize: 64Mi\n", "pools[0].unitSize"},
		{"name missing", "pools:\n  - pageSize: 2Mi\n    unitSize: 64Mi\n", "pools[0].name"},
		{"name bad", "pools:\n  - name: Huge_Pool\n    pageSize: 2Mi\n    unitSize: 64Mi\n", "pools[0].name"},
		{"name socket", "pools:\n  - name: socket\n    pageSize: 2Mi\n    unitSize: 64Mi\n", "pools[0].name"},
		{"name dup", pool("  - name: hugepool\n    pageSize: 2Mi\n    unitSize: 64Mi\n"), "pools[1].name"},
		{"units negative", "pools:\n  - name: p\n    pageSize: 2Mi\n    unitSize: 64Mi\n    unitsPerNUMANode: -2\n", "pools[0].unitsPerNUMANode"},
		{"not yaml", "socketSlots: [\n", "parse"},
		{"dra unknown key", "dra:\n  enabled: true\n  slots: 4\n", `"slots"`},
		{"dra nothing owned", "dra:\n  enabled: true\n", "dra.socketSlots: DRA is enabled but owns no slots"},
		{"dra slots range", "dra:\n  enabled: true\n  socketSlots: 5000\n", "dra.socketSlots: 5000"},
		{"dra driver name", "dra:\n  enabled: true\n  socketSlots: 4\n  driverName: Memif\n", "dra.driverName"},
		{"dra pool clash", pool("dra:\n  enabled: true\n  pools:\n    - name: hugepool\n      pageSize: 2Mi\n      unitSize: 64Mi\n"), "dra.pools[0].name: duplicate pool"},
		{"dra link size", "dra:\n  enabled: true\n  socketSlots: 2\n  linkLimits: {size: 1Gi}\n", `dra.linkLimits.size: "1Gi" out of range 4Ki..16Mi`},
		{"dra link inodes", "dra:\n  enabled: true\n  socketSlots: 2\n  linkLimits: {inodes: 2}\n", "dra.linkLimits.inodes: 2 out of range 4..4096"},
		{"dra link key", "dra:\n  enabled: true\n  socketSlots: 2\n  linkLimits: {bytes: 4096}\n", `"bytes"`},
		{"dra pool page", "dra:\n  enabled: true\n  pools:\n    - name: drapool\n      pageSize: 4Ki\n      unitSize: 64Mi\n", "dra.pools[0].pageSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error for %q", tc.yaml)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

func TestLoadNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("got %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file accepted")
	}
}
