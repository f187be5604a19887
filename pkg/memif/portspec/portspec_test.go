package portspec_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

const goodSpec = `{"version":"1","name":"east","role":"server","mode":"ethernet","id":3,
"socket":"/run/memifnet/slot-000/link/memif.sock","secret":"s3cret","queues":2,"ringSize":512,
"bufferSize":2048,"mac":"02:00:00:00:00:01","link":"chain-1"}`

func writeSpec(t *testing.T, dir, slot, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, slot), 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, slot, portspec.FileName)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParse(t *testing.T) {
	s, err := portspec.Parse([]byte(goodSpec))
	if err != nil {
		t.Fatal(err)
	}
	want := portspec.PortSpec{Version: "1", Name: "east", Role: "server", Mode: "ethernet", ID: 3,
		Socket: "/run/memifnet/slot-000/link/memif.sock", Secret: "s3cret", Queues: 2, RingSize: 512,
		BufferSize: 2048, MAC: "02:00:00:00:00:01", Link: "chain-1"}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Parse = %+v\nwant %+v", s, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", strings.Replace(goodSpec, `"id":3`, `"id":3,"colour":"red"`, 1), `unknown field "colour"`},
		{"bad role", strings.Replace(goodSpec, `"server"`, `"master"`, 1), `field "role"`},
		{"bad mode", strings.Replace(goodSpec, `"ethernet"`, `"tap"`, 1), `field "mode"`},
		{"ring", strings.Replace(goodSpec, `512`, `500`, 1), `field "ringSize"`},
		{"version", strings.Replace(goodSpec, `"version":"1"`, `"version":"2"`, 1), `field "version"`},
		{"both", strings.Replace(goodSpec, `"link":"chain-1"`, `"link":"chain-1","peer":"host"`, 1), `field "link"`},
		{"neither", strings.Replace(goodSpec, `,"link":"chain-1"`, ``, 1), `field "link": missing`},
		{"queues", strings.Replace(goodSpec, `"queues":2`, `"queues":0`, 1), `field "queues"`},
		{"type", strings.Replace(goodSpec, `"id":3`, `"id":"3"`, 1), `PortSpec.id`},
		{"trailing", goodSpec + `{}`, `trailing data`},
		{"no buffer", strings.Replace(goodSpec, `"bufferSize":2048`, `"bufferSize":0`, 1), `field "bufferSize": 0 must be 1..65535`},
		{"buffer over 16 bits", strings.Replace(goodSpec, `"bufferSize":2048`, `"bufferSize":65536`, 1), `field "bufferSize"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := portspec.Parse([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Any buffer size a memif peer takes is a valid port: 1..65535 bytes.
func TestParseSmallBuffer(t *testing.T) {
	for _, size := range []string{"1", "32", "63", "65535"} {
		if s, err := portspec.Parse([]byte(strings.Replace(goodSpec, `"bufferSize":2048`, `"bufferSize":`+size, 1))); err != nil {
			t.Errorf("bufferSize %s: %v", size, err)
		} else if fmt.Sprint(s.BufferSize) != size {
			t.Errorf("bufferSize %s read as %d", size, s.BufferSize)
		}
	}
}

func TestDiscoverDir(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "slot-001", strings.Replace(goodSpec, `"east"`, `"west"`, 1))
	writeSpec(t, dir, "slot-000", goodSpec)
	// A slot without a port and the pools directory are not ports.
	os.MkdirAll(filepath.Join(dir, "slot-002"), 0o755)
	os.MkdirAll(filepath.Join(dir, "pools"), 0o755)
	specs, err := portspec.DiscoverDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Name != "east" || specs[1].Name != "west" {
		t.Fatalf("specs %+v", specs)
	}
	if specs[0].File != filepath.Join(dir, "slot-000", "port.json") {
		t.Fatalf("File = %q", specs[0].File)
	}
	if _, ok := portspec.Lookup(specs, "west"); !ok {
		t.Fatal("Lookup(west) failed")
	}

	t.Setenv(portspec.EnvDir, dir)
	if specs, err := portspec.Discover(); err != nil || len(specs) != 2 {
		t.Fatalf("Discover with %s: %v %v", portspec.EnvDir, specs, err)
	}

	bad := writeSpec(t, dir, "slot-003", `{"version":"1","name":"x"`)
	if _, err := portspec.DiscoverDir(dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a broken port.json must be an error naming %s, got %v", bad, err)
	}
	os.Remove(bad)
	dup := writeSpec(t, dir, "slot-004", goodSpec)
	if _, err := portspec.DiscoverDir(dir); err == nil || !strings.Contains(err.Error(), dup) || !strings.Contains(err.Error(), `"name"`) {
		t.Fatalf("a duplicate name must be an error naming the file and field, got %v", err)
	}

	if specs, err := portspec.DiscoverDir(filepath.Join(dir, "nope")); err != nil || len(specs) != 0 {
		t.Fatalf("missing dir: %v %v", specs, err)
	}
}

func TestDirAndPoolFiles(t *testing.T) {
	t.Setenv(portspec.EnvDir, "")
	if d := portspec.Dir(); d != "/run/memifnet" {
		t.Errorf("Dir() without %s = %q, want /run/memifnet", portspec.EnvDir, d)
	}
	t.Setenv(portspec.EnvPools, " /run/memifnet/pools/a,, /run/memifnet/pools/b ,")
	if got := portspec.PoolFiles(); len(got) != 2 || got[0] != "/run/memifnet/pools/a" || got[1] != "/run/memifnet/pools/b" {
		t.Errorf("PoolFiles() = %q", got)
	}
	t.Setenv(portspec.EnvPools, "")
	if got := portspec.PoolFiles(); len(got) != 0 {
		t.Errorf("PoolFiles() with %s empty = %q", portspec.EnvPools, got)
	}
}

// TestStaysALeaf: the CNI plugin and other node agents read and write port.json through this
// package, so it must not drag the memif data path (or anything else of the module but its
// dependency-free names) into them.
func TestStaysALeaf(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/memifnet/memifnet/pkg/memif/portspec").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, ".") && !strings.HasPrefix(dep, "github.com/memifnet/memifnet/pkg/memif/portspec") &&
			!strings.HasPrefix(dep, "github.com/memifnet/memifnet/internal/names") {
			t.Errorf("portspec depends on %s", dep)
		}
	}
}

// FuzzIsPortName checks the hand-written name check against the rule written as a regexp.
func FuzzIsPortName(f *testing.F) {
	re := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$`)
	for _, s := range []string{"", "a", "-", "a-", "-a", "east", "a-b", "abcdefghijklmno", "abcdefghijklmnop", "A", "a_b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if portspec.IsPortName(s) != re.MatchString(s) {
			t.Fatalf("IsPortName(%q) = %v, regexp says %v", s, portspec.IsPortName(s), re.MatchString(s))
		}
	})
}

// FuzzParse: whatever port.json holds, Parse returns an error or a spec that validates, and the
// spec written back (as memif-cni writes it) parses to a spec written the same.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodSpec))
	f.Add([]byte(strings.Replace(goodSpec, `"link":"chain-1"`, `"peer":"host"`, 1)))
	f.Add([]byte(strings.Replace(goodSpec, `"link":"chain-1"`, `"link":"chain-1","peer":"vpp"`, 1)))
	f.Add([]byte(strings.Replace(goodSpec, `"link":"chain-1"`, `"ips":[],"link":"chain-1"`, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := portspec.Parse(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse(%q) accepted an invalid spec: %v", data, err)
		}
		out, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		back, err := portspec.Parse(out)
		if err != nil {
			t.Fatalf("Parse(%q) = %+v; written back as %s it is refused: %v", data, s, out, err)
		}
		// Compared as written: "ips": [] and no ips are the same port.json.
		if again, _ := json.MarshalIndent(back, "", "  "); !bytes.Equal(again, out) {
			t.Fatalf("Parse(%q) = %+v; written back as %s it parses to %+v", data, s, out, back)
		}
	})
}
