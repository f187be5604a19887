// Command demo brings up a one-node memifnet on this machine (containerd, a standalone kubelet,
// memif-deviceplugin, memif-cni), runs two pods joined by a memif link with memif-perf, narrates
// each step, prints throughput and round-trip latency, and tears everything down, also on
// Ctrl-C. hack/demo.sh installs the prerequisites and builds the kubelet first; run that.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/test/e2e/node"
)

const pluginConfig = `socketSlots: 2
pools:
  - name: hugepool
    pageSize: 2Mi
    unitSize: 16Mi
    unitsPerNUMANode: 2
`

func main() {
	kubelet := flag.String("kubelet", "", "kubelet binary (hack/build-kubelet.sh prints it)")
	base := flag.String("base", "/run/memifnet-demo", "working directory (removed at the end)")
	seconds := flag.Int("seconds", 5, "how long the throughput run lasts")
	flag.Parse()
	if *kubelet == "" {
		fmt.Fprintln(os.Stderr, "demo: --kubelet is required (run hack/demo.sh)")
		os.Exit(2)
	}
	repo, _ := os.Getwd()
	start := time.Now()
	say := func(format string, a ...any) {
		fmt.Printf("[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	s := node.New(repo, *base, say)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, s, *kubelet, *seconds, say)
	if ctx.Err() != nil {
		say("interrupted")
	}
	stop()
	say("tearing down (pods, kubelet, device plugin, containerd, mounts, %s)", *base)
	if terr := s.Teardown(); terr != nil {
		err = errors.Join(err, terr)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n(logs were in %s/logs; rerun with the same command)\n", err, *base)
		os.Exit(1)
	}
	say("done: the machine is as before")
}

func run(ctx context.Context, s *node.Stack, kubelet string, seconds int, say func(string, ...any)) error {
	if err := s.Prepare(); err != nil {
		return err
	}
	say("building memifnet binaries and the image (static, no container engine)")
	if err := s.Build(ctx); err != nil {
		return err
	}
	if err := s.ClaimKubeletDirs(); err != nil {
		return err
	}
	if err := s.EnsureHugepages(16); err != nil {
		return err
	}
	if err := s.StartContainerd(ctx, s.MemifCNI(node.KubeletDir)); err != nil {
		return err
	}
	say("CNI chain: bridge (eth0) then memif-cni, which gets the pod annotations from containerd")
	if err := s.StartKubelet(ctx, kubelet); err != nil {
		return err
	}
	if err := s.StartPlugin(ctx, pluginConfig, 2); err != nil {
		return err
	}

	sum, err := pair(ctx, s, say, "demo-east", "demo-west", "demo-link",
		[]string{"--mode", "echo", "--verify", "--duration", fmt.Sprintf("%ds", seconds+3)},
		[]string{"--mode", "txrx", "--verify", "--size", "64", "--duration", fmt.Sprintf("%ds", seconds)})
	if err != nil {
		return err
	}
	say("THROUGHPUT: %.2f Mpps each way (64-byte frames, every byte verified, %.0f packets, %0.f verify errors)",
		sum["rx_mpps"], sum["rx_pkts"], sum["verify_errors"])

	sum, err = pair(ctx, s, say, "demo-pong", "demo-ping", "demo-link-2",
		[]string{"--mode", "echo", "--duration", "6s"},
		[]string{"--mode", "ping", "--verify", "--duration", "3s"})
	if err != nil {
		return err
	}
	say("LATENCY: round trip p50 %.1f us, p99 %.1f us, p99.9 %.1f us (%.0f pings, pod to pod over memif)",
		sum["rtt_p50_us"], sum["rtt_p99_us"], sum["rtt_p999_us"], sum["samples"])
	return nil
}

// pair runs a server pod and a client pod on one link, narrates, waits for both and deletes
// them; it returns the client's summary.
func pair(ctx context.Context, s *node.Stack, say func(string, ...any), a, b, link string, aArgs, bArgs []string) (map[string]float64, error) {
	pods := []string{a, b}
	args := [][]string{aArgs, bArgs}
	say("pods %s and %s on memif link %q: each asks for memifnet.io/socket: 1 and memifnet.io/hugepool: 1", a, b, link)
	for i, n := range pods {
		if err := s.WritePod(node.PerfPod(n, []string{"east", "west"}[i], link, args[i]...)); err != nil {
			return nil, err
		}
	}
	sandboxes := make([]string, 2)
	for i, n := range pods {
		sb, err := s.WaitSandbox(ctx, n)
		if err != nil {
			return nil, err
		}
		sandboxes[i] = sb
		slots, err := node.PodSlots(ctx, n)
		if err != nil {
			return nil, err
		}
		say("allocated: kubelet -> memif-deviceplugin Allocate gave %s slot %s (+ a hugepage pool unit)", n, strings.Join(slots, ","))
		spec, err := memif.ReadPortSpec(filepath.Join(s.StateDir(), "sockets", slots[0], "port.json"))
		if err != nil {
			return nil, err
		}
		say("attached: memif-cni ADD wired port %s as memif %s, socket %s (container view)", spec.Name, spec.Role, spec.Socket)
	}
	var up string
	err := node.Poll(ctx, 90*time.Second, b+" connected", func() (bool, error) {
		st, err := s.CRI.ContainerOf(ctx, sandboxes[1], "perf")
		if err != nil {
			return false, err
		}
		log, _ := node.Log(st)
		up = grep(log, "link up")
		return up != "", nil
	})
	if err != nil {
		return nil, err
	}
	say("connected: %s: %s; memif-perf runs", b, strings.TrimPrefix(up, "memif-perf: "))
	var sums []map[string]float64
	for i := len(pods) - 1; i >= 0; i-- { // the client ends first
		st, log, err := s.WaitExited(ctx, sandboxes[i], "perf", 2*time.Minute)
		if err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", pods[i], err, log)
		}
		sum, ok := node.Summary(log)
		if st.ExitCode != 0 || !ok {
			return nil, fmt.Errorf("%s: memif-perf exited %d:\n%s", pods[i], st.ExitCode, log)
		}
		sums = append(sums, sum)
	}
	for _, n := range pods {
		if err := s.RemovePod(n); err != nil {
			return nil, err
		}
	}
	err = node.Poll(ctx, 60*time.Second, "CNI DEL of "+a+" and "+b, func() (bool, error) {
		left, err := s.Leftovers()
		return err == nil && len(left) == 0, err
	})
	if err != nil {
		return nil, err
	}
	say("deleted: memif-cni DEL undid both attachments; the slots go back to the device plugin")
	return sums[0], nil
}

func grep(log, s string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
