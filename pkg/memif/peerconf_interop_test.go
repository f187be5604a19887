package memif_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/internal/dpdkpeer"
	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// TestDPDKFromGeneratedArgs: a link whose one end is testpmd started from nothing but the
// dpdk.args and dpdk.app-args memifnet writes for it (internal/peerconf: the --vdev argument
// and, for zero-copy, --single-file-segments; the queue options), and whose other end is a Go
// app opened from its own port spec (memif.PortConfig), as the two pods of a link get them.
// Both roles, a secret on every link, zero-copy on either side, 1500-byte frames chained over
// 256-byte buffers; every frame echoed by testpmd is checked byte for byte.
func TestDPDKFromGeneratedArgs(t *testing.T) {
	requireDPDK(t)
	for _, c := range []struct {
		name       string
		dpdkRole   string
		bsize      int
		zeroCopy   bool // the link's client end runs zero-copy (DPDK's or Go's)
		wantRegion int  // regions the Go side sees: 1, or more when the client hands over its memory
	}{
		{"DPDKClient/chained-bsize256", portspec.RoleClient, 256, false, 1},
		{"DPDKServer/chained-bsize256", portspec.RoleServer, 256, false, 1},
		{"DPDKClient/zero-copy", portspec.RoleClient, 256, true, 2},
		{"DPDKServer/GoZeroCopyClient/chained-bsize256", portspec.RoleServer, 256, true, 2},
		// A host port: testpmd on the node from the host side's <slot>.dpdk.args (peerconf.HostSide
		// of the pod's spec: always the server in copy mode, the host's socket path), the pod's Go
		// client from its port.json; a zero-copy pod client shares its own memory, never the node's.
		{"HostPort/DPDKServer/chained-bsize256", hostSide, 256, false, 1},
		{"HostPort/DPDKServer/GoZeroCopyClient", hostSide, 256, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir() // the link directory both pods see
			link := portspec.PortSpec{
				Version: portspec.Version, Mode: portspec.ModeEthernet, ID: 5, Socket: filepath.Join(dir, "memif.sock"),
				Secret: "5ec4e7deadbeef0123", Queues: 1, RingSize: 1024, BufferSize: c.bsize, ZeroCopy: c.zeroCopy, Link: "chain-1",
			}
			dpdkSpec, goSpec := link, link
			dpdkSpec.Name, dpdkSpec.Role, dpdkSpec.MAC = "dpdk", c.dpdkRole, dpdkMAC
			goSpec.Name, goSpec.MAC, goSpec.Role = "go", "02:90:00:00:00:01", portspec.RoleServer
			if c.dpdkRole == portspec.RoleServer {
				goSpec.Role = portspec.RoleClient
			}
			const slot = "slot-005"
			side := peerconf.Side{Spec: dpdkSpec, Slot: slot}
			if c.dpdkRole == hostSide {
				goSpec.Role, goSpec.Link, goSpec.Peer, goSpec.Secret = portspec.RoleClient, "", portspec.PeerHost, ""
				var err error
				if side, err = peerconf.HostSide(goSpec, peerconf.Host{Socket: goSpec.Socket, Slot: slot, Pod: "default/pod"}); err != nil {
					t.Fatal(err)
				}
				c.dpdkRole = side.Spec.Role
			}
			files, err := peerconf.Generate(side)
			if err != nil || files.DPDKArgs == "" {
				t.Fatalf("dpdk.args: %q, %v", files.DPDKArgs, err)
			}
			if side.Pod != "" && (!strings.Contains(files.DPDKArgs, ",role=server,") || !strings.Contains(files.DPDKArgs, ",zero-copy=no") ||
				strings.Contains(files.DPDKArgs, "--single-file-segments")) {
				t.Fatalf("host side's dpdk.args %q: want a server in copy mode", files.DPDKArgs)
			}
			t.Logf("dpdk.args: %sdpdk.app-args: %s", files.DPDKArgs, files.DPDKAppArgs)
			eal := strings.Fields(files.DPDKArgs)
			vdev, ok := strings.CutPrefix(eal[0], "--vdev=")
			if !ok {
				t.Fatalf("dpdk.args does not start with --vdev=: %q", files.DPDKArgs)
			}
			opts := dpdkpeer.Options{
				// Role and Socket only tell Start how to wait; testpmd gets the generated arguments.
				Role: c.dpdkRole, Socket: dpdkSpec.Socket, FSSocket: true, Vdev: vdev,
				ExtraEAL: eal[1:], ExtraTestpmd: strings.Fields(files.DPDKAppArgs),
				Core: 1, LogDir: t.TempDir(), ConnectTimeout: 30 * time.Second,
			}
			cfg, err := memif.PortConfig(goSpec)
			if err != nil {
				t.Fatal(err)
			}
			logs := &syncBuffer{}
			cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			l := startGenerated(t, opts, cfg, logs)
			info, _ := l.iface.Link()
			if info.PeerName != peerconf.DPDKDevice(slot) || info.RingSize != 1024 || info.Regions != c.wantRegion && !(c.wantRegion > 1 && info.Regions > 1) {
				t.Fatalf("link %+v: want peer %s, ring 1024, %d region(s)", info, peerconf.DPDKDevice(slot), c.wantRegion)
			}
			ic := interopCase{size: 1500, bsize: c.bsize, zeroCopy: c.zeroCopy && goSpec.Role == portspec.RoleClient}
			echo(t, l, ic, 3000, 64)
			// testpmd goes first, right after the Go side's last Release: the link drops under
			// a zero-copy client that has just given buffers back, whose control goroutine then
			// takes the rings' buffers back into the same pool share (a data race before the
			// share was locked; TestZeroCopyReleaseDuringDisconnect plays it without DPDK).
			l.stop(t)
			waitFor(t, l.iface, "the Go side seeing testpmd go", func() bool { return !l.iface.Up() })
			if st := l.iface.Stats(); st.LinkDowns != 1 || st.LinkUps != 1 {
				t.Fatalf("link transitions after testpmd stopped: %d up, %d down; want 1 and 1", st.LinkUps, st.LinkDowns)
			}
		})
	}
}

// hostSide marks the case whose DPDK end is a host port's host side.
const hostSide = "host"

// startGenerated starts the two ends in the order DPDK needs (a DPDK client connects once, so
// the Go server listens first; a DPDK server refuses clients until its port has started) and
// waits for the link on both sides.
func startGenerated(t *testing.T, opts dpdkpeer.Options, cfg memif.Config, logs *syncBuffer) *link {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	l := &link{logs: logs}
	start := func() {
		var err error
		if l.peer, err = dpdkpeer.Start(opts); err != nil {
			t.Fatalf("start testpmd: %v", err)
		}
		t.Cleanup(func() {
			l.peer.Kill()
			if t.Failed() {
				t.Logf("dpdkpeer output:\n%s", l.peer.Output())
				t.Logf("testpmd log (tail):\n%s", tail(l.peer.Log(), 40))
				t.Logf("Go side log:\n%s", logs.String())
			}
		})
	}
	open := func() {
		var err error
		if l.iface, err = memif.Open(cfg); err != nil {
			t.Fatalf("memif.Open: %v", err)
		}
		t.Cleanup(func() { l.iface.Close() })
	}
	if cfg.Role == memif.RoleServer {
		open()
		start()
	} else {
		start()
		if err := l.peer.Wait(ctx, dpdkpeer.Listening); err != nil {
			t.Fatal(err)
		}
		open()
	}
	if err := l.iface.WaitUp(ctx); err != nil {
		t.Fatalf("Go side: link not up: %v", err)
	}
	if err := l.peer.Wait(ctx, dpdkpeer.Connected); err != nil {
		t.Fatal(err)
	}
	return l
}
