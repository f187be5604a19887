package dpdkpeer

import (
	"slices"
	"strings"
	"testing"
)

func TestCommand(t *testing.T) {
	o, err := Options{Role: "client", Socket: "/run/x.sock", ID: 3, BSize: 128, RSize: 11, Queues: 2,
		Secret: "s3", MAC: "02:dd:00:00:00:01", ZeroCopy: true, Core: 1, Mode: "txonly", PktSize: 512,
		Memory: NoHuge, Prefix: "p1", ExtraTestpmd: []string{"--tx-first"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(o.command(), " ")
	want := "taskset -c 1 dpdk-testpmd --lcores (0,1)@1 --file-prefix p1 --no-pci --no-telemetry " +
		"--log-level pmd.net.memif:debug " +
		"--vdev net_memif3,role=client,id=3,socket=/run/x.sock,socket-abstract=yes,bsize=128,rsize=11,secret=s3,mac=02:dd:00:00:00:01,zero-copy=yes " +
		"--no-huge -m 64 --single-file-segments -- --forward-mode=txonly --port-topology=loop --auto-start " +
		"--stats-period 1 --no-flush-rx --nb-cores=1 --rxq=2 --txq=2 --total-num-mbufs=8192 --txpkts=512 --tx-first"
	if got != want {
		t.Errorf("command\n got %s\nwant %s", got, want)
	}
	o, err = Options{Role: "server", Socket: "/tmp/d/memif.sock", FSSocket: true, Memory: Hugepages}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	args := o.command()
	if !slices.Contains(args, "--in-memory") || slices.Contains(args, "--no-huge") || slices.Contains(args, "--txpkts=64") ||
		!slices.Contains(args, "net_memif0,role=server,id=0,socket=/tmp/d/memif.sock,socket-abstract=no") ||
		!slices.Contains(args, "--forward-mode=io") || o.socketName() != "/tmp/d/memif.sock" {
		t.Errorf("server command %q (socket %s)", args, o.socketName())
	}
	if !strings.HasPrefix(o.Prefix, "memifnet-peer-server-") {
		t.Errorf("default prefix %q", o.Prefix)
	}
	o2, _ := Options{Role: "server", Socket: "/s"}.withDefaults()
	if o2.Prefix == o.Prefix {
		t.Errorf("two peers of one process share the file prefix %q", o.Prefix)
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{
		{Socket: "/s"},
		{Role: "master", Socket: "/s"},
		{Role: "server"},
		{Role: "server", Socket: "/s", Mode: "flowgen"},
		{Role: "server", Socket: "/s,zero-copy=yes"},
		{Role: "server", Socket: "/s", Secret: "a=b"},
		{Role: "server", Socket: "/s", Prefix: "../x"},
		{Role: "server", Socket: "/s", Prefix: ".."},
	} {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// A piece of real testpmd 22.11 output: two stats screens while connected, and the wrapped
// end-of-run summary after a disconnect, which must not count.
const testpmdOutput = "\x1b[2J\x1b[1;1H\r\n" +
	"  ######################## NIC statistics for port 0  ########################\r\n" +
	"  RX-packets: 0          RX-missed: 0          RX-bytes:  0\r\n" +
	"  RX-errors: 0\r\n" +
	"  RX-nombuf:  0         \r\n" +
	"  TX-packets: 0          TX-errors: 0          TX-bytes:  0\r\n" +
	"\r\n" +
	"  Throughput (since last show)\r\n" +
	"  Rx-pps:            0          Rx-bps:            0\r\n" +
	"  Tx-pps:            0          Tx-bps:            0\r\n" +
	"  ############################################################################\r\n" +
	"  RX-packets: 1000       RX-missed: 0          RX-bytes:  64000\r\n" +
	"  TX-packets: 999        TX-errors: 0          TX-bytes:  63936\r\n" +
	"  Rx-pps:       2000000          Rx-bps:   1024000000\r\n" +
	"  Tx-pps:       1000000          Tx-bps:    512000000\r\n" +
	"  RX-packets: 5000       RX-missed: 0          RX-bytes:  320000\r\n" +
	"  TX-packets: 4999       TX-errors: 0          TX-bytes:  319936\r\n" +
	"  Rx-pps:       4000000          Rx-bps:   1024000000\r\n" +
	"  Tx-pps:       3000000          Tx-bps:    512000000\r\n" +
	"  RX-packets: 7000       RX-missed: 0          RX-bytes:  448000\r\n" +
	"  TX-packets: 6999       TX-errors: 0          TX-bytes:  447936\r\n" +
	"  Rx-pps:       6000000          Rx-bps:   1024000000\r\n" +
	"  Tx-pps:       5000000          Tx-bps:    512000000\r\n" +
	"  RX-packets: 0          RX-missed: 0          RX-bytes:  0\r\n" +
	"  TX-packets: 0          TX-errors: 0          TX-bytes:  0\r\n" +
	"  Rx-pps:             0          Rx-bps:            0\r\n" +
	"  Tx-pps:             0          Tx-bps:            0\r\n" +
	"  ---------------------- Forward statistics for port 0  ----------------------\r\n" +
	"  RX-packets: 18446744073709551008 RX-dropped: 0             RX-total: 18446744073709551008\r\n" +
	"  TX-packets: 18446744073709551007 TX-dropped: 0             TX-total: 18446744073709551007\r\n"

func TestStatsParser(t *testing.T) {
	var s statsParser
	for _, l := range strings.Split(testpmdOutput, "\n") {
		s.line(strings.TrimRight(l, "\r"))
	}
	if want := (Stats{}); s.latest != want {
		t.Errorf("latest %+v, want %+v (the counters after the disconnect)", s.latest, want)
	}
	if want := (Stats{RxPkts: 7000, RxBytes: 448000, TxPkts: 6999, TxBytes: 447936}); s.max != want {
		t.Errorf("max %+v, want %+v", s.max, want)
	}
	// active window: the 2, 4 and 6 Mpps blocks; without its first and last: 4 (and 3 for Tx)
	rx, tx, n := s.rates()
	if rx != 4 || tx != 3 || n != 1 {
		t.Errorf("rates %v rx, %v tx over %d samples, want 4, 3 over 1", rx, tx, n)
	}
}
