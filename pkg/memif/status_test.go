package memif_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// slotPort writes a client port.json for addr into a fresh slot directory and reads it back as
// Discover would (File set).
func slotPort(t *testing.T, addr string) portspec.PortSpec {
	t.Helper()
	t.Setenv(portspec.EnvPools, "")
	slot := filepath.Join(t.TempDir(), "slot-007")
	if err := os.Mkdir(slot, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := portspec.PortSpec{Version: "1", Name: "east", Role: "client", Mode: "ethernet", Socket: addr,
		Queues: 2, RingSize: 64, BufferSize: 2048, Peer: "host"}
	data, _ := json.Marshal(spec)
	file := filepath.Join(slot, portspec.FileName)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := portspec.Read(file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitStatus reads <slot>/status.json until ok accepts it; every version read must parse.
func waitStatus(t *testing.T, slot string, what string, ok func(portstatus.Status) bool) portstatus.Status {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	var last portstatus.Status
	for {
		data, err := os.ReadFile(filepath.Join(slot, portstatus.File))
		if err == nil {
			if last, err = portstatus.Parse(data); err != nil {
				t.Fatalf("the status file does not parse: %v\n%s", err, data)
			}
			if ok(last) {
				return last
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("status file never showed %s; last: %+v", what, last)
		}
	}
}

// TestPortStatusFile: a port opened from port.json reports in its slot's status.json that the
// link is up, the packets and bytes it moved both ways, the peer's disconnect with its reason,
// and, once closed, its final state; every version of the file read on the way is valid, and no
// temporary file is left behind.
func TestPortStatusFile(t *testing.T) {
	defer memif.SetStatusInterval(20 * time.Millisecond)()
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr, RxQueues: 2, TxQueues: 2, RingSize: 64})
	spec := slotPort(t, addr)
	slot := filepath.Dir(spec.File)
	cli, err := memif.OpenPort(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	waitStatus(t, slot, "link up", func(s portstatus.Status) bool { return s.State == portstatus.StateUp })
	if err := waitUp(t, srv); err != nil {
		t.Fatal(err)
	}
	in := [][]byte{make([]byte, 100), make([]byte, 100), make([]byte, 100)}
	if n := srv.TxQueue(1).TxBurst(in); n != 3 { // queue 1: the file sums every queue
		t.Fatalf("server sent %d", n)
	}
	got := [][]byte{make([]byte, 0, 2048), make([]byte, 0, 2048), make([]byte, 0, 2048)}
	for n := 0; n < 3; {
		n += cli.RxQueue(1).RxBurst(got[n:])
	}
	if n := cli.TxQueue(0).TxBurst([][]byte{make([]byte, 60), make([]byte, 70)}); n != 2 {
		t.Fatalf("client sent %d", n)
	}
	s := waitStatus(t, slot, "the counters", func(s portstatus.Status) bool { return s.Tx.Packets == 2 })
	if s.Rx.Packets != 3 || s.Rx.Bytes != 300 || s.Tx.Bytes != 130 || s.LinkUps != 1 || s.LinkDowns != 0 || s.Port != "east" {
		t.Fatalf("status %+v: want rx 3 packets 300 bytes, tx 2 packets 130 bytes, one link up", s)
	}
	srv.Close()
	s = waitStatus(t, slot, "link down", func(s portstatus.Status) bool { return s.State == portstatus.StateDown })
	if s.LinkDowns != 1 || s.LastDownReason != portstatus.ReasonPeer || s.LastDownMessage == "" {
		t.Fatalf("status after the server left: %+v, want one link down for reason %q", s, portstatus.ReasonPeer)
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	// Close writes the last status before it returns: no waiting.
	data, err := os.ReadFile(filepath.Join(slot, portstatus.File))
	if err != nil {
		t.Fatal(err)
	}
	if s, err = portstatus.Parse(data); err != nil || s.State != portstatus.StateClosed || s.Rx.Packets != 3 {
		t.Fatalf("status after Close: %+v, %v; want state closed with the counters", s, err)
	}
	entries, _ := os.ReadDir(slot)
	if len(entries) != 2 {
		t.Fatalf("slot holds %v, want port.json and status.json only", entries)
	}
}

// TestPortStatusUnwritable: a slot where the status file cannot be written (here a directory
// is in the way) costs the node its view of the port, never the port itself.
func TestPortStatusUnwritable(t *testing.T) {
	defer memif.SetStatusInterval(10 * time.Millisecond)()
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr, RxQueues: 2, TxQueues: 2, RingSize: 64})
	spec := slotPort(t, addr)
	if err := os.Mkdir(filepath.Join(filepath.Dir(spec.File), portstatus.File), 0o755); err != nil {
		t.Fatal(err)
	}
	cli, err := memif.OpenPort(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, cli)
}

// TestPortConfigWritesStatus: a port opened with PortConfig and Open, as an application that
// adjusts the config does (memif-perf), keeps its status file too.
func TestPortConfigWritesStatus(t *testing.T) {
	defer memif.SetStatusInterval(20 * time.Millisecond)()
	addr := memiftest.UniqueSocket()
	open(t, memif.Config{Role: memif.RoleServer, Socket: addr, RingSize: 64})
	spec := slotPort(t, addr)
	cfg, err := memif.PortConfig(spec)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StatusDir != filepath.Dir(spec.File) {
		t.Fatalf("StatusDir %q, want port.json's directory %q", cfg.StatusDir, filepath.Dir(spec.File))
	}
	cli, err := memif.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	waitStatus(t, cfg.StatusDir, "link up", func(s portstatus.Status) bool { return s.State == portstatus.StateUp })
}
