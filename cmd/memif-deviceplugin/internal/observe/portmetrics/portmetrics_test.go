package portmetrics

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/internal/tmpfs"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

var start = time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)

// node is a state directory with slots mounted as the agent mounts them (a tmpfs each).
type node struct {
	t        *testing.T
	slotsDir string
}

func newNode(t *testing.T, slots ...string) *node {
	t.Helper()
	testutil.RequireRoot(t, "the slots are tmpfs mounts, as the agent makes them")
	n := &node{t: t, slotsDir: filepath.Join(t.TempDir(), "sockets")}
	d, err := safefs.MkdirAllOpen(n.slotsDir, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t.Cleanup(func() { testutil.UnmountUnder(t, n.slotsDir) })
	for _, s := range slots {
		if _, err := d.Mkdir(s, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := d.MountTmpfs(s, safefs.TmpfsOptions{Source: "memifnet-slot", Limits: tmpfs.Limits{Size: 4 << 20, Inodes: 64}, Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *node) path(slot string) string { return filepath.Join(n.slotsDir, slot, portstatus.File) }

// write puts a status file into slot as the pod's application writes it.
func (n *node) write(slot string, s portstatus.Status) {
	n.t.Helper()
	b, err := portstatus.Marshal(s)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(n.path(slot), b, 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func status(port, state string, rxPackets uint64) portstatus.Status {
	return portstatus.Status{Version: portstatus.Version, Port: port, State: state, Time: start, IntervalSeconds: 5,
		LinkUps: 1, Rx: portstatus.Counters{Packets: rxPackets, Bytes: 64 * rxPackets, RingFull: 2},
		Tx: portstatus.Counters{Packets: 7, Bytes: 448, Drops: 1, RingFull: 3}}
}

var pair = []Port{
	{Namespace: "ns", Pod: "east", Port: "p0", Link: "l1", Slot: "slot-000"},
	{Namespace: "ns", Pod: "west", Port: "p0", Link: "l1", Slot: "slot-001"},
}

func collector(n *node, ports []Port, now *time.Time) (*Collector, *prometheus.Registry) {
	c := New(n.slotsDir, func() ([]Port, error) { return ports, nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.now = func() time.Time { return *now }
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return c, reg
}

// TestLinkPair: both ends of a link report up: the per-port series carry the node's labels
// (never the file's), link_up is 1; one end down makes it 0; a file not rewritten for three
// intervals counts as down.
func TestLinkPair(t *testing.T) {
	n := newNode(t, "slot-000", "slot-001")
	now := start.Add(time.Second)
	_, reg := collector(n, pair, &now)
	n.write("slot-000", status("p0", portstatus.StateUp, 10))
	n.write("slot-001", status("p0", portstatus.StateUp, 7))
	want := `
# HELP memifnet_link_up Whether both ends of a pod-to-pod link on this node are up (1) or not (0); claim is the DRA claim of a DRA link, empty for a memif-cni link.
# TYPE memifnet_link_up gauge
memifnet_link_up{claim="",link="l1",namespace="ns"} 1
# HELP memifnet_port_rx_packets_total Packets received.
# TYPE memifnet_port_rx_packets_total counter
memifnet_port_rx_packets_total{link="l1",namespace="ns",pod="east",port="p0"} 10
memifnet_port_rx_packets_total{link="l1",namespace="ns",pod="west",port="p0"} 7
# HELP memifnet_port_ring_full_total Transmit bursts cut short by a full ring (zero-copy: or an empty pool).
# TYPE memifnet_port_ring_full_total counter
memifnet_port_ring_full_total{link="l1",namespace="ns",pod="east",port="p0"} 3
memifnet_port_ring_full_total{link="l1",namespace="ns",pod="west",port="p0"} 3
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "memifnet_link_up", "memifnet_port_rx_packets_total", "memifnet_port_ring_full_total"); err != nil {
		t.Fatal(err)
	}
	if probs, err := promtest.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", probs, err)
	}

	down := status("p0", portstatus.StateDown, 7)
	down.LinkDowns, down.LastDownReason, down.LastDownMessage = 1, portstatus.ReasonPeer, "peer said bye"
	n.write("slot-001", down)
	now = now.Add(MinInterval)
	want = `
# HELP memifnet_link_up Whether both ends of a pod-to-pod link on this node are up (1) or not (0); claim is the DRA claim of a DRA link, empty for a memif-cni link.
# TYPE memifnet_link_up gauge
memifnet_link_up{claim="",link="l1",namespace="ns"} 0
# HELP memifnet_port_last_disconnect_info Why the link last went down (reason from a fixed set); absent until it has.
# TYPE memifnet_port_last_disconnect_info gauge
memifnet_port_last_disconnect_info{link="l1",namespace="ns",pod="west",port="p0",reason="peer"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "memifnet_link_up", "memifnet_port_last_disconnect_info"); err != nil {
		t.Fatal(err)
	}

	n.write("slot-001", status("p0", portstatus.StateUp, 8))
	now = start.Add(16 * time.Second) // both files are 16 s old, written every 5 s
	want = `
# HELP memifnet_port_up Whether the memif link is connected (1) or not (0), as the port's status file says (0 when the file is stale).
# TYPE memifnet_port_up gauge
memifnet_port_up{link="l1",namespace="ns",pod="east",port="p0"} 0
memifnet_port_up{link="l1",namespace="ns",pod="west",port="p0"} 0
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "memifnet_port_up"); err != nil {
		t.Fatal(err)
	}
}

// TestScrapeFloodReadsOnce: scrapes within MinInterval are served from one pass over the files.
func TestScrapeFloodReadsOnce(t *testing.T) {
	n := newNode(t, "slot-000", "slot-001")
	now := start
	c, _ := collector(n, pair, &now)
	n.write("slot-000", status("p0", portstatus.StateUp, 1))
	if got := c.Readings()[0].Status.Rx.Packets; got != 1 {
		t.Fatalf("rx packets %d", got)
	}
	n.write("slot-000", status("p0", portstatus.StateUp, 2))
	now = now.Add(MinInterval - time.Millisecond)
	if got := c.Readings()[0].Status.Rx.Packets; got != 1 {
		t.Fatalf("re-read within MinInterval: rx packets %d", got)
	}
	now = now.Add(time.Millisecond)
	if got := c.Readings()[0].Status.Rx.Packets; got != 2 {
		t.Fatalf("not re-read after MinInterval: rx packets %d", got)
	}
}

// TestLinkKindsKeyedApart (security row 39): a DRA claim's "link" parameter is free text, so a
// tenant names it after a memif-cni link of its namespace (or another claim's link). Both kinds
// in one namespace under one name, and a second claim with that name too: each link is keyed
// and reported on its own (claim label), the memif-cni link that is up stays 1, and no series is
// reported twice.
func TestLinkKindsKeyedApart(t *testing.T) {
	n := newNode(t, "slot-000", "slot-001", "dra-slot-000", "dra-slot-001", "dra-slot-002", "dra-slot-003")
	now := start.Add(time.Second)
	ps := append(append([]Port(nil), pair...),
		Port{Namespace: "ns", Pod: "a", Port: "east", Link: "l1", Claim: "forger", Slot: "dra-slot-000"},
		Port{Namespace: "ns", Pod: "b", Port: "west", Link: "l1", Claim: "forger", Slot: "dra-slot-001"},
		Port{Namespace: "ns", Pod: "c", Port: "east", Link: "l1", Claim: "other", Slot: "dra-slot-002"},
		Port{Namespace: "ns", Pod: "d", Port: "west", Link: "l1", Claim: "other", Slot: "dra-slot-003"})
	_, reg := collector(n, ps, &now)
	n.write("slot-000", status("p0", portstatus.StateUp, 10))
	n.write("slot-001", status("p0", portstatus.StateUp, 7))
	n.write("dra-slot-000", status("east", portstatus.StateDown, 0))
	n.write("dra-slot-001", status("west", portstatus.StateDown, 0))
	n.write("dra-slot-002", status("east", portstatus.StateUp, 1))
	n.write("dra-slot-003", status("west", portstatus.StateUp, 1))
	want := `
# HELP memifnet_link_up Whether both ends of a pod-to-pod link on this node are up (1) or not (0); claim is the DRA claim of a DRA link, empty for a memif-cni link.
# TYPE memifnet_link_up gauge
memifnet_link_up{claim="",link="l1",namespace="ns"} 1
memifnet_link_up{claim="forger",link="l1",namespace="ns"} 0
memifnet_link_up{claim="other",link="l1",namespace="ns"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "memifnet_link_up"); err != nil {
		t.Fatal(err)
	}
}
