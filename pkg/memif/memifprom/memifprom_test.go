package memifprom_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memifprom"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// TestCollector: the metrics of a client port follow what it moved (packet and byte counts per
// queue and direction, a drop), its link state and, after the server left, the disconnect's
// reason; promlint finds nothing to say about the names.
func TestCollector(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{Name: "srv", RxQueues: 2, TxQueues: 2},
		memif.Config{Name: "east", RxQueues: 2, TxQueues: 2, ReconnectInterval: time.Hour})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(memifprom.New(cli))

	if n := srv.TxQueue(1).TxBurst([][]byte{make([]byte, 100), make([]byte, 50)}); n != 2 {
		t.Fatalf("server sent %d", n)
	}
	got := [][]byte{make([]byte, 0, 2048), make([]byte, 0, 60)} // the 100-byte packet does not fit the second
	for n := 0; n < 1; {
		n += cli.RxQueue(1).RxBurst(got)
	}
	cli.RxQueue(1).RxBurst(got)
	if n := cli.TxQueue(0).TxBurst([][]byte{make([]byte, 64), {}}); n != 2 { // the empty one is dropped
		t.Fatalf("client took %d", n)
	}
	want := `
# HELP memifnet_port_up Whether the memif link is connected (1) or not (0).
# TYPE memifnet_port_up gauge
memifnet_port_up{port="east"} 1
# HELP memifnet_port_tx_packets_total Packets queued to the peer.
# TYPE memifnet_port_tx_packets_total counter
memifnet_port_tx_packets_total{port="east",queue="0"} 1
memifnet_port_tx_packets_total{port="east",queue="1"} 0
# HELP memifnet_port_tx_bytes_total Payload bytes of the packets queued to the peer.
# TYPE memifnet_port_tx_bytes_total counter
memifnet_port_tx_bytes_total{port="east",queue="0"} 64
memifnet_port_tx_bytes_total{port="east",queue="1"} 0
# HELP memifnet_port_rx_bytes_total Payload bytes of the packets received.
# TYPE memifnet_port_rx_bytes_total counter
memifnet_port_rx_bytes_total{port="east",queue="0"} 0
memifnet_port_rx_bytes_total{port="east",queue="1"} 150
# HELP memifnet_port_link_transitions_total Link state changes since the port was opened, by the state changed to.
# TYPE memifnet_port_link_transitions_total counter
memifnet_port_link_transitions_total{port="east",to="down"} 0
memifnet_port_link_transitions_total{port="east",to="up"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "memifnet_port_up", "memifnet_port_tx_packets_total",
		"memifnet_port_tx_bytes_total", "memifnet_port_rx_bytes_total", "memifnet_port_link_transitions_total"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Fatalf("promlint: %v %+v", err, problems)
	}

	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for cli.Up() {
		select {
		case <-cli.Changed():
		case <-ctx.Done():
			t.Fatal("the link never went down")
		}
	}
	want = `
# HELP memifnet_port_up Whether the memif link is connected (1) or not (0).
# TYPE memifnet_port_up gauge
memifnet_port_up{port="east"} 0
# HELP memifnet_port_last_disconnect_info Why the link last went down (reason from a fixed set); absent until it has.
# TYPE memifnet_port_last_disconnect_info gauge
memifnet_port_last_disconnect_info{port="east",reason="peer"} 1
# HELP memifnet_port_link_transitions_total Link state changes since the port was opened, by the state changed to.
# TYPE memifnet_port_link_transitions_total counter
memifnet_port_link_transitions_total{port="east",to="down"} 1
memifnet_port_link_transitions_total{port="east",to="up"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "memifnet_port_up",
		"memifnet_port_last_disconnect_info", "memifnet_port_link_transitions_total"); err != nil {
		t.Fatal(err)
	}
	// Counters survive the disconnect.
	want = `
# HELP memifnet_port_drops_total Packets lost: bad descriptors, too large for the receiver's buffer, or unsendable.
# TYPE memifnet_port_drops_total counter
memifnet_port_drops_total{direction="rx",port="east",queue="0"} 0
memifnet_port_drops_total{direction="rx",port="east",queue="1"} 0
memifnet_port_drops_total{direction="tx",port="east",queue="0"} 1
memifnet_port_drops_total{direction="tx",port="east",queue="1"} 0
# HELP memifnet_port_rx_packets_total Packets received.
# TYPE memifnet_port_rx_packets_total counter
memifnet_port_rx_packets_total{port="east",queue="0"} 0
memifnet_port_rx_packets_total{port="east",queue="1"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "memifnet_port_drops_total", "memifnet_port_rx_packets_total"); err != nil {
		t.Fatal(err)
	}
}

// TestLibraryDoesNotImportPrometheus: the collector is the only way Prometheus gets into an
// application; pkg/memif and the status file format stay free of it.
func TestLibraryDoesNotImportPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/memifnet/memifnet/pkg/memif",
		"github.com/memifnet/memifnet/pkg/memif/portstatus").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/"+"prometheus/") {
			t.Errorf("pkg/memif depends on %s", dep)
		}
	}
}
