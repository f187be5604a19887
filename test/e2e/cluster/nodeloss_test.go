package cluster

import (
	"syscall"
	"testing"
	"time"
)

// A component started again (StartNode) replaces the record of its ended instance, so that
// Daemon and the health check see the one that runs; a running one is never forgotten.
func TestAddDaemonReplacesEnded(t *testing.T) {
	c := New("", t.TempDir(), Inputs{}, nil)
	start := func(name string) *Daemon {
		t.Helper()
		d, err := c.start(name, nil, "sleep", "60")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Stop(syscall.SIGKILL, 5*time.Second) })
		return d
	}
	first := start("node2-kubelet")
	other := start("node2-kubelet")
	if n := len(c.state.Daemons); n != 2 {
		t.Fatalf("%d records after a second start while the first runs, want 2 (none forgotten)", n)
	}
	if err := first.Stop(syscall.SIGKILL, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := other.Stop(syscall.SIGKILL, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	again := start("node2-kubelet")
	if got := c.Daemon("node2-kubelet"); got == nil || got.PID != again.PID || !got.Alive() {
		t.Fatalf("Daemon(node2-kubelet) = %+v, want the running one (pid %d)", got, again.PID)
	}
	if n := len(c.state.Daemons); n != 2 {
		t.Fatalf("%d records, want 2: the new one in the place of an ended one", n)
	}
}

// StopNode and StartNode work on the nodes after the first only.
func TestExtraNode(t *testing.T) {
	c := New("", t.TempDir(), Inputs{}, nil)
	c.NodeCount = 3
	if _, err := c.extraNode(1); err == nil {
		t.Error("node 1 (the machine) taken as a node StopNode may kill")
	}
	if _, err := c.extraNode(4); err == nil {
		t.Error("node 4 of a 3-node cluster accepted")
	}
	if s, err := c.extraNode(2); err != nil || s.Name != "10.250.0.2" {
		t.Errorf("node 2: %+v, %v", s, err)
	}
}
