package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkAddDel measures one ADD and one DEL of a link port through libcni, process start
// included, against the kubelet stand-in. It reports p50 and p99 of each in milliseconds.
//
//	go test ./cmd/memif-cni -run '^$' -bench AddDel -benchtime 200x
func BenchmarkAddDel(b *testing.B) {
	n := newNode(b, 2)
	peer := n.newPod("peer@bench", "slot-001")
	n.mustAdd(peer)
	pods := make([]*pod, b.N)
	for i := range pods {
		pods[i] = n.newPod("east@bench", "slot-000")
	}
	adds := make([]time.Duration, 0, b.N)
	dels := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for _, p := range pods {
		t0 := time.Now()
		n.mustAdd(p)
		t1 := time.Now()
		n.mustDel(p)
		adds, dels = append(adds, t1.Sub(t0)), append(dels, time.Since(t1))
	}
	b.StopTimer()
	pct := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000
	}
	// The floor: starting the binary for VERSION, which does no work, on the same machine now.
	starts := make([]time.Duration, 0, 50)
	for range 50 {
		cmd := exec.Command(filepath.Join(pluginDir(b), "memif-cni"))
		cmd.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
		cmd.Stdin = strings.NewReader("{}")
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		starts = append(starts, time.Since(t0))
	}
	b.ReportMetric(pct(starts, 0.5), "exec-p50-ms")
	b.ReportMetric(pct(adds, 0.5), "add-p50-ms")
	b.ReportMetric(pct(adds, 0.99), "add-p99-ms")
	b.ReportMetric(pct(dels, 0.5), "del-p50-ms")
	b.ReportMetric(pct(dels, 0.99), "del-p99-ms")
	b.Logf("%d ADD/DEL pairs", b.N)
	n.mustDel(peer)
}
