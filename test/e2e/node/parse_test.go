package node

import (
	"os"
	"path/filepath"
	"testing"

	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestLogAndSummary(t *testing.T) {
	f := filepath.Join(t.TempDir(), "0.log")
	// CRI log format; a long line split in a partial (P) and a final (F) part.
	os.WriteFile(f, []byte(`2026-11-30T12:00:00.000000000Z stderr F memif-perf: link up
2026-11-30T12:00:01.000000000Z stderr F [  1.0s] rx    0.284 Mpps | rx_pkts=283584 tx_pkts=284096 drops=0 verify_errors=0
2026-11-30T12:00:02.000000000Z stderr F [  2.0s] rx    0.150 Mpps | rx_pkts=433600 tx_pkts=434112 drops=0 verify_errors=0
2026-11-30T12:00:02.100000000Z stdout P rx_pkts=433600 rx_mpps=0.215 
2026-11-30T12:00:02.100000000Z stdout F tx_pkts=434112 tx_mpps=0.216 drops=0 verify_errors=0
2026-11-30T12:00:02.200000000Z stderr F memif-perf: corrupt=0 lost=0 late=0
`), 0o644)
	log, err := Log(&cri.ContainerStatus{LogPath: f})
	if err != nil {
		t.Fatal(err)
	}
	sum, ok := Summary(log)
	if !ok || sum["rx_pkts"] != 433600 || sum["tx_mpps"] != 0.216 || sum["verify_errors"] != 0 {
		t.Errorf("summary %v %v from\n%s", sum, ok, log)
	}
	if rx := LastProgressRx(log); rx != 433600 {
		t.Errorf("LastProgressRx = %v", rx)
	}
	if rx := LastProgressRx("memif-perf: link up\n"); rx != -1 {
		t.Errorf("no progress line: %v", rx)
	}
	if _, ok := Summary("nothing"); ok {
		t.Error("summary found in a log without one")
	}
}
