//go:build e2e

// Package e2e runs memifnet against real node components: containerd with runc and the CNI
// plugins (Tier 1), and a real standalone kubelet with the real device plugin (Tier 2). Run with
// `make e2e` as root (see docs/e2e.md); `go test ./...` skips this package (build tag e2e).
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/hack/e2e/node"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// newStack prepares a stack under base, builds everything and registers its teardown, which
// runs however the test ends.
func newStack(t *testing.T, base string) *node.Stack {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the e2e tests need root (containerd, mounts, network namespaces)")
	}
	start := time.Now()
	s := node.New(repoRoot(t), base, func(format string, a ...any) {
		t.Logf("[%6.2fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	})
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, s)
		}
		if err := s.Teardown(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := s.Build(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func dumpLogs(t *testing.T, s *node.Stack) {
	logs, _ := filepath.Glob(s.Path("logs", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("--- tail of %s:\n%s", l, b)
	}
}

// perfResult is a finished memif-perf container.
type perfResult struct {
	exit    int32
	log     string
	summary map[string]float64
}

// waitExited waits for the named container of a sandbox to exit and returns its result.
func waitExited(ctx context.Context, t *testing.T, s *node.Stack, sandboxID, name string, timeout time.Duration) perfResult {
	t.Helper()
	var st *cri.ContainerStatus
	err := node.Poll(ctx, timeout, "container "+name+" exited", func() (bool, error) {
		var err error
		st, err = s.CRI.ContainerOf(ctx, sandboxID, name)
		return err == nil && st.State == cri.ContainerState_CONTAINER_EXITED, err
	})
	var r perfResult
	if st != nil {
		r.log, _ = node.Log(st)
		r.exit = st.ExitCode
		r.summary, _ = node.Summary(r.log)
	}
	if err != nil {
		t.Fatalf("%v\nlog so far:\n%s", err, r.log)
	}
	return r
}

// checkVerified fails unless a memif-perf run exited 0 with verified traffic received.
func checkVerified(t *testing.T, name string, r perfResult) {
	t.Helper()
	t.Logf("%s: exit %d, %s", name, r.exit, lastLine(r.log))
	if r.exit != 0 || r.summary == nil || r.summary["rx_pkts"] == 0 || r.summary["verify_errors"] != 0 ||
		!strings.Contains(r.log, "corrupt=0 lost=0 late=0") {
		t.Errorf("%s: want exit 0, rx_pkts > 0, verify_errors=0 and a clean verification; log:\n%s", name, r.log)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func noLeftovers(t *testing.T, s *node.Stack, when string) {
	t.Helper()
	left, err := s.Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("%s, left behind:\n  %s", when, strings.Join(left, "\n  "))
	}
}
