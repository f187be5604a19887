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

	"github.com/memifnet/memifnet/test/e2e/node"
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
	st, log, err := s.WaitExited(ctx, sandboxID, name, timeout)
	if err != nil {
		t.Fatalf("%v\nlog so far:\n%s", err, log)
	}
	r := perfResult{exit: st.ExitCode, log: log}
	r.summary, _ = node.Summary(log)
	return r
}

// checkVerified fails unless a memif-perf run exited 0 with verified traffic received.
func checkVerified(t *testing.T, name string, r perfResult) {
	t.Helper()
	t.Logf("%s: exit %d, %s", name, r.exit, summaryLine(r.log))
	if r.exit != 0 || r.summary == nil || r.summary["rx_pkts"] == 0 || r.summary["verify_errors"] != 0 ||
		!strings.Contains(r.log, "corrupt=0 lost=0 late=0") {
		t.Errorf("%s: want exit 0, rx_pkts > 0, verify_errors=0 and a clean verification; log:\n%s", name, r.log)
	}
}

// summaryLine is memif-perf's last summary line (stdout and stderr interleave in the log).
func summaryLine(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "rx_pkts=") {
			return lines[i]
		}
	}
	return "(no summary line)"
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

// eventuallyNoLeftovers waits for the DEL that is under way: containerd marks a sandbox
// NOTREADY when its pause process stops, before it runs CNI DEL.
func eventuallyNoLeftovers(ctx context.Context, t *testing.T, s *node.Stack, when string) {
	t.Helper()
	var left []string
	err := node.Poll(ctx, 30*time.Second, "CNI DEL done", func() (bool, error) {
		var err error
		left, err = s.Leftovers()
		return err == nil && len(left) == 0, err
	})
	if err != nil {
		t.Errorf("%s, left behind:\n  %s", when, strings.Join(left, "\n  "))
	}
}
