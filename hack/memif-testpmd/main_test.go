package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memifnet/memifnet/internal/testutil"
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
	args, err := options(ports, 1, 64, 8192, "p", []string{"--forward-mode=macswap"}).Command()
	if err != nil {
		t.Fatal(err)
	}
	cmd := strings.Join(args, " ")
	want := "dpdk-testpmd --lcores (0,1)@1 --file-prefix p --no-pci --no-telemetry --log-level pmd.net.memif:debug " +
		"--vdev=net_memif10001,role=server,id=0,socket=/run/memifnet/slot-001/link/memif.sock,socket-abstract=no,rsize=10,bsize=2048,mac=02:5e:00:00:00:01 " +
		"--vdev=net_memif10002,role=client,id=3,socket=/run/memifnet/slot-002/memif.sock,socket-abstract=no,rsize=10,bsize=2048,zero-copy=yes,mac=02:5e:00:00:00:02 --single-file-segments " +
		"--no-huge -m 64 -- --forward-mode=io --port-topology=paired --auto-start --stats-period 1 --no-flush-rx --nb-cores=1 " +
		"--rxq=2 --txq=2 --total-num-mbufs=8192 --forward-mode=macswap"
	if cmd != want {
		t.Errorf("command\n %s\nwant\n %s", cmd, want)
	}
	if args, _ := options(ports[:1], 0, 64, 8192, "p", nil).Command(); !slices.Contains(args, "--port-topology=loop") {
		t.Errorf("one port: %q, want it looped onto itself", args)
	}
	if _, err := readPorts(nil); err == nil {
		t.Error("no dpdk.args: no error")
	}
}

// fakeTestpmd puts on PATH a dpdk-testpmd that prints lines and exits with status: at once, or
// (waits) once it is stopped with SIGINT, as testpmd is. It creates the file it returns once its
// SIGINT handler is in place.
func fakeTestpmd(t *testing.T, lines []string, status int, waits bool) (ready string) {
	dir := t.TempDir()
	out, ready := filepath.Join(dir, "out"), filepath.Join(dir, "ready")
	if err := os.WriteFile(out, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\ntrap 'kill $! 2>/dev/null; exit %d' INT\ncat %s\ntouch %s\n", status, out, ready)
	if waits {
		script += "sleep 60 &\nwait $!\n"
	}
	script += fmt.Sprintf("exit %d\n", status)
	if err := os.WriteFile(filepath.Join(dir, "dpdk-testpmd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return ready
}

// The run is judged from testpmd's log (lines as DPDK 22.11 prints them) as the supervisor
// (internal/dpdkpeer) reads it, not from testpmd's status; the supervisor runs for real, with a
// stand-in for testpmd.
func TestJudge(t *testing.T) {
	up := []string{
		"memif_connect(): Connected.",
		"  RX-packets: 1200       RX-missed: 0          RX-bytes:  1800000",
		"  TX-packets: 1100       TX-errors: 0          TX-bytes:  1650000",
	}
	for _, c := range []struct {
		name   string
		lines  []string
		status int
		waits  bool // testpmd runs until it is stopped
		signal bool // memif-testpmd gets SIGTERM
		want   int
		why    string
	}{
		{"peer left, segfault after", append(slices.Clone(up), "memif_msg_receive_disconnect(): Disconnect received: interface closed",
			"  TX-packets: 18446744073709551008  TX-dropped: 0  TX-total: 0"), 139, true, false, exitOK, "the peer left"},
		{"died while the peer was there", up, 139, false, false, exitFailed, "testpmd exited by itself"},
		{"stopped by SIGTERM", up, 0, true, true, exitOK, "stopped by terminated"},
		{"nothing forwarded", up[:1], 0, true, true, exitFailed, "stopped by terminated"},
		{"no port", []string{"testpmd: No probed ethernet devices"}, 1, true, false, exitNoLink, "no port started"},
		{"never up", nil, 0, true, false, exitNoLink, "the link did not come up in 300ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ready := fakeTestpmd(t, c.lines, c.status, c.waits)
			ports := []port{{eal: []string{"--vdev=net_memif0,role=server,id=0,socket=/nonexistent/memif.sock,socket-abstract=no"}, queues: 1}}
			o := options(ports, 0, 64, 8192, fmt.Sprintf("memif-testpmd-test-%d", os.Getpid()), nil)
			o.ConnectTimeout, o.StopGrace = 300*time.Millisecond, 5*time.Second
			sigs := make(chan os.Signal, 1)
			type judged struct {
				code int
				last string
			}
			done := make(chan judged)
			go func() {
				code, last := supervise(o, sigs)
				done <- judged{code, last}
			}()
			if c.signal {
				// the stand-in takes SIGINT (its stop) only once its handler is in place
				testutil.Eventually(t, 10*time.Second, "the stand-in's SIGINT handler", func() bool {
					_, err := os.Stat(ready)
					return err == nil
				})
				sigs <- syscall.SIGTERM
			}
			j := <-done
			code, last := j.code, j.last
			if code != c.want || !strings.HasPrefix(last, "memif-testpmd: "+c.why+";") {
				t.Errorf("exit %d, want %d; last line %q, want the reason %q", code, c.want, last, c.why)
			}
			if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
				t.Fatalf("%s after a run that kept no log: %v, %v", os.DevNull, st, err) // NoLog writes there
			}
			if c.want == exitOK && !strings.Contains(last, " tx_pkts=1100 ") {
				t.Errorf("last line %q: want tx_pkts=1100 (the periodic block's, not the summary's)", last)
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
