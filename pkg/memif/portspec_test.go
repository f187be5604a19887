package memif_test

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

const goodSpec = `{"version":"1","name":"east","role":"server","mode":"ethernet","id":3,
"socket":"/run/memifnet/slot-000/link/memif.sock","secret":"s3cret","queues":2,"ringSize":512,
"bufferSize":2048,"mac":"02:00:00:00:00:01","link":"chain-1"}`

func writeSpec(t *testing.T, dir, slot, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, slot), 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, slot, "port.json")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestPortSpecConfig(t *testing.T) {
	s, err := memif.ParsePortSpec([]byte(goodSpec))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	want := memif.Config{Role: memif.RoleServer, Socket: "/run/memifnet/slot-000/link/memif.sock", ID: 3,
		Secret: "s3cret", Mode: memif.ModeEthernet, Name: "east", RxQueues: 2, TxQueues: 2, RingSize: 512, BufferSize: 2048}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("Config() = %+v\nwant %+v", cfg, want)
	}
}

func TestParsePortSpecErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", strings.Replace(goodSpec, `"id":3`, `"id":3,"colour":"red"`, 1), `unknown field "colour"`},
		{"bad role", strings.Replace(goodSpec, `"server"`, `"master"`, 1), `field "role"`},
		{"bad mode", strings.Replace(goodSpec, `"ethernet"`, `"tap"`, 1), `field "mode"`},
		{"ring", strings.Replace(goodSpec, `512`, `500`, 1), `field "ringSize"`},
		{"version", strings.Replace(goodSpec, `"version":"1"`, `"version":"2"`, 1), `field "version"`},
		{"both", strings.Replace(goodSpec, `"link":"chain-1"`, `"link":"chain-1","peer":"host"`, 1), `field "link"`},
		{"neither", strings.Replace(goodSpec, `,"link":"chain-1"`, ``, 1), `neither link nor peer`},
		{"queues", strings.Replace(goodSpec, `"queues":2`, `"queues":0`, 1), `field "queues"`},
		{"type", strings.Replace(goodSpec, `"id":3`, `"id":"3"`, 1), `PortSpec.id`},
		{"trailing", goodSpec + `{}`, `trailing data`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := memif.ParsePortSpec([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDiscoverDir(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "slot-001", strings.Replace(goodSpec, `"east"`, `"west"`, 1))
	writeSpec(t, dir, "slot-000", goodSpec)
	// A slot without a port and the pools directory are not ports.
	os.MkdirAll(filepath.Join(dir, "slot-002"), 0o755)
	os.MkdirAll(filepath.Join(dir, "pools"), 0o755)
	specs, err := memif.DiscoverDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Name != "east" || specs[1].Name != "west" {
		t.Fatalf("specs %+v", specs)
	}
	if specs[0].File != filepath.Join(dir, "slot-000", "port.json") {
		t.Fatalf("File = %q", specs[0].File)
	}
	if _, ok := memif.Lookup(specs, "west"); !ok {
		t.Fatal("Lookup(west) failed")
	}

	t.Setenv(memif.EnvPortDir, dir)
	if specs, err := memif.Discover(); err != nil || len(specs) != 2 {
		t.Fatalf("Discover with %s: %v %v", memif.EnvPortDir, specs, err)
	}

	bad := writeSpec(t, dir, "slot-003", `{"version":"1","name":"x"`)
	if _, err := memif.DiscoverDir(dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a broken port.json must be an error naming %s, got %v", bad, err)
	}
	os.Remove(bad)
	dup := writeSpec(t, dir, "slot-004", goodSpec)
	if _, err := memif.DiscoverDir(dir); err == nil || !strings.Contains(err.Error(), dup) || !strings.Contains(err.Error(), `"name"`) {
		t.Fatalf("a duplicate name must be an error naming the file and field, got %v", err)
	}

	if specs, err := memif.DiscoverDir(filepath.Join(dir, "nope")); err != nil || len(specs) != 0 {
		t.Fatalf("missing dir: %v %v", specs, err)
	}
}

// TestOpenPortPair opens both ends of a link from two specs, as two pods would, and checks a
// payload crosses.
func TestOpenPortPair(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "memif.sock")
	base := memif.PortSpec{Version: "1", Name: "east", Mode: "ethernet", ID: 7, Socket: sock, Secret: "abc",
		Queues: 1, RingSize: 256, BufferSize: 2048, Link: "chain-1"}
	srvSpec, cliSpec := base, base
	srvSpec.Role, cliSpec.Role = "server", "client"
	cliSpec.Name = "west"
	quiet := memif.WithLogger(memiftest.QuietLogger())
	srv, err := memif.OpenPort(srvSpec, quiet, memif.WithPools(""))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := memif.OpenPort(cliSpec, quiet, memif.WithPools(""),
		memif.WithConfig(func(c *memif.Config) { c.Memory = 1 /* alloc.BackingMemfd */ }))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cli.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
	payload := []byte("memifnet port spec payload")
	for cli.TxQueue(0).TxBurst([][]byte{payload}) != 1 {
		if ctx.Err() != nil {
			t.Fatal("tx ring never had room")
		}
	}
	buf := [][]byte{make([]byte, 2048)}
	for srv.RxQueue(0).RxBurst(buf) != 1 {
		if ctx.Err() != nil {
			t.Fatal("packet never arrived")
		}
	}
	if string(buf[0]) != string(payload) {
		t.Fatalf("received %q, want %q", buf[0], payload)
	}
}

// TestPortSpecStaysLight keeps the in-pod library free of Kubernetes, gRPC and CNI: PortSpec is
// the contract with memif-cni, and it must not drag the plugin's dependencies into every app.
func TestPortSpecStaysLight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps",
		"github.com/memifnet/memifnet/pkg/memif", "github.com/memifnet/memifnet/pkg/alloc",
		"github.com/memifnet/memifnet/pkg/socket").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	// Spelled in pieces so that a grep for these imports does not find this test.
	banned := []string{"k8s" + ".io/", "google.golang.org" + "/grpc", "github.com/" + "containernetworking/"}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if strings.HasPrefix(dep, b) {
				t.Errorf("the in-pod library depends on %s", dep)
			}
		}
	}
}

// TestOpenPortUsesPoolUnit: a client port maps its region from the pod's pool unit (the ring
// cookie shows up in the file), and a second port finds the unit taken.
func TestOpenPortUsesPoolUnit(t *testing.T) {
	unit := filepath.Join(t.TempDir(), "hugepool-n0-000")
	if err := os.WriteFile(unit, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	quiet := memif.WithLogger(memiftest.QuietLogger())
	spec := memif.PortSpec{Version: "1", Name: "east", Role: "client", Mode: "ethernet", Socket: addr, Queues: 1, RingSize: 256, BufferSize: 2048, Peer: "host"}
	cli, err := memif.OpenPort(spec, quiet, memif.WithPools(unit))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, cli)
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	if binary.NativeEndian.Uint32(b) != 0x03E31F20 {
		t.Fatalf("pool unit starts with %x, want the ring cookie", b[:4])
	}
	spec2 := spec
	spec2.ID = 1
	second, err := memif.OpenPort(spec2, quiet, memif.WithPools(unit))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	for second.Err() == nil {
		<-second.Changed()
	}
	if err := second.Err(); !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second port: %v", err)
	}
}

// FuzzIsPortName checks the hand-written name check against the rule written as a regexp.
func FuzzIsPortName(f *testing.F) {
	re := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$`)
	for _, s := range []string{"", "a", "-", "a-", "-a", "east", "a-b", "abcdefghijklmno", "abcdefghijklmnop", "A", "a_b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if memif.IsPortName(s) != re.MatchString(s) {
			t.Fatalf("IsPortName(%q) = %v, regexp says %v", s, memif.IsPortName(s), re.MatchString(s))
		}
	})
}
