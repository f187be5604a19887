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
	var starts, hellos []time.Duration
	for range 50 {
		for _, bin := range []string{filepath.Join(pluginDir(b), "memif-cni"), hello} {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
			cmd.Stdin = strings.NewReader("{}")
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			if bin == hello {
				hellos = append(hellos, time.Since(t0))
			} else {
				starts = append(starts, time.Since(t0))
			}
		}
	}
	b.ReportMetric(pct(starts, 0.5), "exec-p50-ms")
	b.ReportMetric(pct(hellos, 0.5), "empty-go-p50-ms")
	b.ReportMetric(pct(adds, 0.5), "add-p50-ms")
	b.ReportMetric(pct(adds, 0.99), "add-p99-ms")
	b.ReportMetric(pct(dels, 0.5), "del-p50-ms")
	b.ReportMetric(pct(dels, 0.99), "del-p99-ms")
	b.Logf("%d ADD/DEL pairs", b.N)
	n.mustDel(peer)
}
