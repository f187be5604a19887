package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// BenchmarkAddDel measures one ADD and one DEL of a link port through libcni, process start
// included, against the kubelet stand-in. It reports p50 and p99 of each in milliseconds.
//
//	go test ./cmd/memif-cni -run '^$' -bench AddDel -benchtime 200x
//
// With MEMIF_CNI_BASELINE set to a directory holding another build of memif-cni and
// memif-cni-podinfo (say, main's), the pairs alternate between the two builds and the baseline's
// figures are reported too (base-*): interleaved, so that both see the same load on a shared
// machine.
func BenchmarkAddDel(b *testing.B) { benchAddDel(b, false) }

// BenchmarkAddDelViaKubelet is BenchmarkAddDel for a runtime that passes no annotations: ADD
// runs the memif-cni-podinfo helper, which reads them from the kubelet's Pods API over HTTPS.
func BenchmarkAddDelViaKubelet(b *testing.B) { benchAddDel(b, true) }

func benchAddDel(b *testing.B, viaKubelet bool) {
	n := newNode(b, 2)
	if viaKubelet {
		n.caps = false
		n.extra = map[string]any{"insecureKubeletPodsAPI": true, "kubeletURL": n.kubelet.ServePodsAPI(b)}
	}
	peer := n.newPod("peer@bench", "slot-001")
	n.mustAdd(peer)
	pods := make([]*pod, b.N)
	for i := range pods {
		pods[i] = n.newPod("east@bench", "slot-000")
	}
	bins := []string{pluginDir(b)}
	if dir := os.Getenv("MEMIF_CNI_BASELINE"); dir != "" {
		bins = append(bins, dir)
	}
	clients := make([]*libcni.CNIConfig, len(bins))
	for i, dir := range bins {
		clients[i] = newCNI([]string{dir}, filepath.Join(n.root, "cache"))
	}
	adds, dels := make([][]time.Duration, len(bins)), make([][]time.Duration, len(bins))
	b.ResetTimer()
	for i, p := range pods {
		k := i % len(bins)
		n.cni = clients[k]
		t0 := time.Now()
		n.mustAdd(p)
		t1 := time.Now()
		n.mustDel(p)
		adds[k], dels[k] = append(adds[k], t1.Sub(t0)), append(dels[k], time.Since(t1))
	}
	n.cni = clients[0]
	b.StopTimer()
	pct := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000
	}
	// The floors, on the same machine now: starting the plugin for VERSION, which does no work,
	// and starting an empty Go program (on this VM a page fault costs ~40 us, so process start is
	// most of an ADD).
	hello := filepath.Join(b.TempDir(), "hello")
	if err := os.WriteFile(hello+".go", []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", hello, hello+".go").CombinedOutput(); err != nil {
		b.Fatalf("build empty program: %v\n%s", err, out)
	}
	starts := make([][]time.Duration, len(bins)+1) // the last: the empty program
	for range 50 {
		for k := range starts {
			bin := hello
			if k < len(bins) {
				bin = filepath.Join(bins[k], "memif-cni")
			}
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
			cmd.Stdin = strings.NewReader("{}")
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			starts[k] = append(starts[k], time.Since(t0))
		}
	}
	b.ReportMetric(pct(starts[len(bins)], 0.5), "empty-go-p50-ms")
	for k, prefix := range []string{"", "base-"}[:len(bins)] {
		if len(adds[k]) == 0 { // b.N = 1: the first run has no baseline pair
			continue
		}
		b.ReportMetric(pct(starts[k], 0.5), prefix+"exec-p50-ms")
		b.ReportMetric(pct(adds[k], 0.5), prefix+"add-p50-ms")
		b.ReportMetric(pct(adds[k], 0.99), prefix+"add-p99-ms")
		b.ReportMetric(pct(dels[k], 0.5), prefix+"del-p50-ms")
		b.ReportMetric(pct(dels[k], 0.99), prefix+"del-p99-ms")
	}
	b.Logf("%d ADD/DEL pairs", b.N)
	n.mustDel(peer)
}
