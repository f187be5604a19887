package memif_test

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

func TestPortConfig(t *testing.T) {
	t.Setenv(portspec.EnvPools, "")
	s := portspec.PortSpec{Version: "1", Name: "east", Role: "server", Mode: "ethernet", ID: 3,
		Socket: "/run/memifnet/slot-000/link/memif.sock", Secret: "s3cret", Queues: 2, RingSize: 512,
		BufferSize: 2048, Link: "chain-1"}
	cfg, err := memif.PortConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	want := memif.Config{Role: memif.RoleServer, Socket: "/run/memifnet/slot-000/link/memif.sock", ID: 3,
		Secret: "s3cret", Mode: memif.ModeEthernet, Name: "east", RxQueues: 2, TxQueues: 2, RingSize: 512, BufferSize: 2048,
		MaxRegionBytes: memif.DefaultMaxRegionBytes}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("PortConfig() = %+v\nwant %+v", cfg, want)
	}
	// A server admits what a client with the port's own sizes announces, zero-copy pool included.
	big := s
	big.Queues, big.RingSize, big.BufferSize = 8, 32768, 9000
	if cfg, err := memif.PortConfig(big); err != nil || cfg.MaxRegionBytes < 3*8*32768*9000 {
		t.Fatalf("server limit for 8 queues of 32768 x 9000 B: %d, %v", cfg.MaxRegionBytes, err)
	}
	// zeroCopy reaches a client's Config; a server copies.
	s.ZeroCopy = true
	if cfg, err := memif.PortConfig(s); err != nil || cfg.ZeroCopy {
		t.Fatalf("server with zeroCopy: ZeroCopy %v, %v; want false", cfg.ZeroCopy, err)
	}
	s.Role = "client"
	if cfg, err := memif.PortConfig(s); err != nil || !cfg.ZeroCopy {
		t.Fatalf("client with zeroCopy: ZeroCopy %v, %v; want true", cfg.ZeroCopy, err)
	}
	s.Mode = "tap"
	if _, err := memif.PortConfig(s); err == nil || !strings.Contains(err.Error(), `field "mode"`) {
		t.Fatalf("PortConfig of a bad spec: %v, want an error naming the field", err)
	}
}

// openPort opens a port as OpenPort does, with a quiet logger, no pool units and memfd memory.
func openPort(t *testing.T, s portspec.PortSpec) *memif.Interface {
	t.Helper()
	cfg, err := memif.PortConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = memiftest.QuietLogger()
	cfg.NewRegion, cfg.Memory = nil, alloc.BackingMemfd
	ifc, err := memif.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ifc.Close() })
	return ifc
}

// TestOpenPortPair opens both ends of a link from two specs, as two pods would, and checks a
// payload crosses.
func TestOpenPortPair(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "memif.sock")
	base := portspec.PortSpec{Version: "1", Name: "east", Mode: "ethernet", ID: 7, Socket: sock, Secret: "abc",
		Queues: 1, RingSize: 256, BufferSize: 2048, Link: "chain-1"}
	srvSpec, cliSpec := base, base
	srvSpec.Role, cliSpec.Role = "server", "client"
	cliSpec.Name = "west"
	srv, cli := openPort(t, srvSpec), openPort(t, cliSpec)
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

// TestLibraryStaysLight keeps the in-pod library free of Kubernetes, gRPC, CNI and Prometheus: portspec is
// the contract with memif-cni, and it must not drag the plugin's dependencies into every app.
func TestLibraryStaysLight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps",
		"github.com/memifnet/memifnet/pkg/memif", "github.com/memifnet/memifnet/pkg/alloc",
		"github.com/memifnet/memifnet/pkg/socket").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	// Spelled in pieces so that a grep for these imports does not find this test.
	// Prometheus comes in through pkg/memif/memifprom only, for the apps that want it.
	banned := []string{"k8s" + ".io/", "google.golang.org" + "/grpc", "github.com/" + "containernetworking/", "github.com/" + "prometheus/"}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if strings.HasPrefix(dep, b) {
				t.Errorf("the in-pod library depends on %s", dep)
			}
		}
	}
}

// TestOpenPortUsesPoolUnit: a client port maps its region from the pod's pool unit named by
// $MEMIFNET_POOLS (the ring cookie shows up in the file), and a second port finds the unit taken.
func TestOpenPortUsesPoolUnit(t *testing.T) {
	unit := filepath.Join(t.TempDir(), "hugepool-n0-000")
	if err := os.WriteFile(unit, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(portspec.EnvPools, unit)
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	spec := portspec.PortSpec{Version: "1", Name: "east", Role: "client", Mode: "ethernet", Socket: addr, Queues: 1, RingSize: 256, BufferSize: 2048, Peer: "host"}
	cli, err := memif.OpenPort(spec)
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
	second, err := memif.OpenPort(spec2)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	waitFor(t, second, "second port's error", func() bool { return second.Err() != nil })
	if err := second.Err(); !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second port: %v", err)
	}
}
