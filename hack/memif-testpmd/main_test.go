package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The command line is the ready config's words, in the slots' order, with the largest queue
// count, and the caller's testpmd arguments last (so they win).
func TestCommandFromReadyConfig(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for slot, c := range map[string][2]string{
		"slot-001": {"--vdev=net_memif10001,role=server,id=0,socket=/run/memifnet/slot-001/link/memif.sock,socket-abstract=no,rsize=10,bsize=2048,mac=02:5e:00:00:00:01\n", "--rxq=1 --txq=1\n"},
		"slot-002": {"--vdev=net_memif10002,role=client,id=3,socket=/run/memifnet/slot-002/memif.sock,socket-abstract=no,rsize=10,bsize=2048,zero-copy=yes,mac=02:5e:00:00:00:02 --single-file-segments\n", "--rxq=2 --txq=2\n"},
	} {
		if err := os.MkdirAll(filepath.Join(dir, slot), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string]string{"dpdk.args": c[0], "dpdk.app-args": c[1]} {
			if err := os.WriteFile(filepath.Join(dir, slot, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, _ = filepath.Glob(filepath.Join(dir, "*", "dpdk.args"))
	ports, err := readPorts(files)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 || ports[0].role != "server" || ports[1].role != "client" ||
		ports[1].socket != "/run/memifnet/slot-002/memif.sock" || ports[1].queues != 2 {
		t.Fatalf("ports %+v", ports)
	}
	cmd := strings.Join(command(ports, 1, 64, 8192, "p", []string{"--forward-mode=macswap"}), " ")
	want := "dpdk-testpmd --lcores (0,1)@1 --no-huge -m 64 --no-pci --no-telemetry --file-prefix p --log-level pmd.net.memif:debug " +
		"--vdev=net_memif10001,role=server,id=0,socket=/run/memifnet/slot-001/link/memif.sock,socket-abstract=no,rsize=10,bsize=2048,mac=02:5e:00:00:00:01 " +
		"--vdev=net_memif10002,role=client,id=3,socket=/run/memifnet/slot-002/memif.sock,socket-abstract=no,rsize=10,bsize=2048,zero-copy=yes,mac=02:5e:00:00:00:02 --single-file-segments " +
		"-- --rxq=2 --txq=2 --auto-start --stats-period 1 --no-flush-rx --nb-cores=1 --total-num-mbufs=8192 --forward-mode=macswap"
	if cmd != want {
		t.Errorf("command\n %s\nwant\n %s", cmd, want)
	}
	if _, err := readPorts(nil); err == nil {
		t.Error("no dpdk.args: no error")
	}
}

// The run is judged from testpmd's log (lines as DPDK 22.11 prints them), not from its status.
func TestJudge(t *testing.T) {
	up := []string{
		"memif_connect(): Connected.",
		"  RX-packets: 1200       RX-missed: 0          RX-bytes:  1800000",
		"  TX-packets: 1100       TX-errors: 0          TX-bytes:  1650000",
	}
	for _, c := range []struct {
		name   string
		lines  []string
		why    string
		status int
		want   int
		stopAt int // the line after which testpmd is to be stopped (-1: never)
	}{
		{"peer left, segfault after", append(slices.Clone(up), "memif_msg_receive_disconnect(): Disconnect received: interface closed",
			"  TX-packets: 18446744073709551008  TX-dropped: 0  TX-total: 0"), "the peer left", 139, exitOK, 3},
		{"died while the peer was there", up, "testpmd exited by itself", 139, exitFailed, -1},
		{"stopped by SIGTERM", up, "stopped by terminated", 0, exitOK, -1},
		{"nothing forwarded", up[:1], "stopped by terminated", 0, exitFailed, -1},
		{"no port", []string{"testpmd: No probed ethernet devices"}, "no port started", 1, exitNoLink, 0},
		{"never up", nil, "the link did not come up in 2m0s", 0, exitNoLink, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var st runState
			stopAt := -1
			for i, l := range c.lines {
				if st.see(l) && stopAt < 0 {
					stopAt = i
				}
			}
			if stopAt != c.stopAt {
				t.Errorf("stop after line %d, want %d", stopAt, c.stopAt)
			}
			if got := st.judge(c.why, c.status); got != c.want {
				t.Errorf("exit %d, want %d (state %+v)", got, c.want, st)
			}
			if c.want == exitOK && st.maxTx != 1100 {
				t.Errorf("tx_pkts %d, want 1100 (the periodic block's, not the summary's)", st.maxTx)
			}
		})
	}
}

// The retry commands name the forwarding mode testpmd will run (the last --forward-mode wins,
// as in testpmd) and cover the whole retry time.
func TestRetryCommands(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "io"},
		{[]string{"--forward-mode=macswap"}, "macswap"},
		{[]string{"--forward-mode=mac", "--txpkts=64", "--forward-mode=io"}, "io"},
	} {
		if got := forwardMode(c.args); got != c.want {
			t.Errorf("forwardMode(%q) = %s, want %s", c.args, got, c.want)
		}
	}
	t.Setenv("TMPDIR", t.TempDir())
	f, err := retryCommands("macswap", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f)
	if want := "set fwd macswap retry\nset burst tx delay 100 retry 50000\n"; err != nil || string(b) != want {
		t.Errorf("command file %q (%v), want %q", b, err, want)
	}
}

// A server removes a stale socket file, and nothing else: not a live socket, not a symlink a pod
// planted where its socket goes (the symlink stays, and so does what it points to).
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	stale, live, link := filepath.Join(dir, "stale.sock"), filepath.Join(dir, "live.sock"), filepath.Join(dir, "link.sock")
	for _, p := range []string{stale, live} {
		l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: p, Net: "unixpacket"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		if p == stale {
			l.Close()
		} else {
			defer l.Close()
		}
	}
	if err := os.Symlink(live, link); err != nil {
		t.Fatal(err)
	}
	if err := removeStale(stale); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket still there: %v", err)
	}
	if err := removeStale(live); err != nil {
		t.Fatal(err)
	}
	if err := removeStale(link); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("symlink: %v, want a refusal", err)
	}
	for _, p := range []string{live, link} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if err := removeStale(filepath.Join(dir, "none.sock")); err != nil {
		t.Errorf("no socket: %v", err)
	}
}
