package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// writePort writes <dir>/<slot>/port.json as memif-cni does in a pod.
func writePort(t *testing.T, dir, slot string, s portspec.PortSpec) {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, slot), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, slot, "port.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startIn runs memif-perf with $MEMIFNET_DIR set to dir and no pool units.
func startIn(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	t.Setenv(portspec.EnvDir, dir)
	t.Setenv(portspec.EnvPools, "")
	return start(t, args...)
}

// Two "pods", each with the port.json memif-cni would have written for the two ends of a link:
// --port alone is enough to connect them, with role, socket, id, secret, queues and sizes taken
// from the files.
func TestPortFromPortJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	linkDir := t.TempDir()
	sock := filepath.Join(linkDir, "memif.sock")
	base := portspec.PortSpec{
		Version: portspec.Version, Mode: "ethernet", ID: 7, Socket: sock, Secret: "s3cret",
		Queues: 2, RingSize: 512, BufferSize: 2048, Link: "chain-1",
	}
	east, west := base, base
	east.Name, east.Role = "east", "server"
	west.Name, west.Role = "west", "client"
	podA, podB := t.TempDir(), t.TempDir()
	writePort(t, podA, "slot-000", east)
	writePort(t, podB, "slot-001", west)
	// A second, unrelated port in pod B must not be picked.
	other := base
	other.Name, other.Role, other.Link, other.Peer, other.Socket = "host0", "client", "", "host", filepath.Join(linkDir, "nobody.sock")
	writePort(t, podB, "slot-002", other)

	srv := startIn(t, podA, "--port", "east", "--mode", "echo", "--verify", "--duration", "4s", "--connect-timeout", "10s")
	waitListening(t, srv, sock)
	cli := startIn(t, podB, "--port", "west", "--mode", "txrx", "--verify", "--size", "1500", "--duration", "2s", "--connect-timeout", "10s")
	cr, sr := cli.wait(t, 30*time.Second), srv.wait(t, 30*time.Second)
	logBoth(t, "west txrx", cr)
	logBoth(t, "east echo", sr)
	if cr.code != 0 || sr.code != 0 {
		t.Fatalf("exit codes: west %d, east %d, want 0 and 0", cr.code, sr.code)
	}
	if cr.num(t, "rx_pkts") == 0 || cr.num(t, "verify_errors") != 0 || sr.num(t, "verify_errors") != 0 {
		t.Errorf("west: rx_pkts=%s verify_errors=%s; east verify_errors=%s", cr.fields["rx_pkts"], cr.fields["verify_errors"], sr.fields["verify_errors"])
	}
	// The values came from port.json: two queues, the link's id.
	for _, want := range []string{`port "west"`, "client", "id 7", "2 queue(s)", "2 rx / 2 tx queues"} {
		if !strings.Contains(cr.stderr, want) {
			t.Errorf("west stderr lacks %q:\n%s", want, cr.stderr)
		}
	}
}

func TestPortUsageErrors(t *testing.T) {
	dir := t.TempDir()
	writePort(t, dir, "slot-000", portspec.PortSpec{
		Version: portspec.Version, Name: "east", Role: "server", Mode: "ethernet",
		Socket: filepath.Join(dir, "memif.sock"), Queues: 1, RingSize: 1024, BufferSize: 2048, Link: "l",
	})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--port", "west"}, `no port "west"`},
		{[]string{"--port", "west"}, `["east"]`},
		{[]string{"--port", "east", "--role", "client", "--queues", "2"}, "--queues, --role from port.json"},
		{[]string{"--port", "east", "--socket", "@x"}, "--socket"},
	}
	for _, c := range cases {
		cmd := exec.Command(binary(t), c.args...)
		cmd.Env = append(os.Environ(), portspec.EnvDir+"="+dir)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("memif-perf %v: %v, output:\n%s\nwant exit 2 and %q", c.args, err, out, c.want)
		}
	}
}
