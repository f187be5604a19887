// Command demo shows memifnet on a real one-node Kubernetes cluster on this machine: it brings
// the cluster up (test/e2e/cluster), installs memifnet with `kubectl apply -k manifests/`, runs
// the example link pods, then measures throughput and round-trip latency between two pods on a
// memif link, narrating each step, and tears everything down, also on Ctrl-C. hack/demo.sh
// installs the prerequisites and builds this; run that (`make demo`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

func main() {
	base := flag.String("base", "/run/memifnet-demo", "the cluster's directory (removed at the end)")
	seconds := flag.Int("seconds", 5, "how long the throughput run lasts")
	flag.Parse()
	repo, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	start := time.Now()
	say := func(format string, a ...any) {
		fmt.Printf("[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	say("building (or reusing) Kubernetes v1.34.4 (one binary: kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd), containerd v2, and the memifnet image")
	in, err := cluster.Build(ctx, repo, os.Stderr)
	var c *cluster.Cluster
	if err == nil {
		c = cluster.New(repo, *base, in, say)
		err = run(ctx, c, *seconds, say)
	}
	interrupted := ctx.Err() != nil
	if interrupted {
		say("interrupted")
	}
	stop()
	if c != nil {
		say("tearing down: kubectl delete -k manifests/, then the cluster (every process by PID, mounts, the iptables rule, / back to private, %s)", *base)
		if out, derr := c.KubectlCmd(context.Background(), "delete", "-k", "manifests/", "--ignore-not-found", "--wait=true").CombinedOutput(); derr != nil && c.Daemon("kube-apiserver") != nil {
			say("kubectl delete -k manifests/: %v: %s", derr, out)
		}
		terr := c.Down()
		if interrupted && terr == nil {
			// The run's error is only the cancellation.
			say("interrupted: everything was torn down")
			os.Exit(130)
		}
		err = errors.Join(err, terr)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n(rerun with the same command; it cleans up first)\n", err)
		os.Exit(1)
	}
	say("done: the machine is as before")
}

// kubectl runs kubectl as a user would and prints the command and its output.
func kubectl(ctx context.Context, c *cluster.Cluster, say func(string, ...any), stdin string, args ...string) (string, error) {
	say("$ kubectl %s", strings.Join(args, " "))
	cmd := c.KubectlCmd(ctx, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			fmt.Printf("          %s\n", l)
		}
	}
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

func run(ctx context.Context, c *cluster.Cluster, seconds int, say func(string, ...any)) error {
	say("bringing up a one-node cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd v2 (runc, CDI), kubelet; all on 127.0.0.1")
	if err := c.Up(ctx); err != nil {
		return err
	}
	say("installing memifnet as users do: the node agent DaemonSet (memif-deviceplugin + the install-cni sidecar that chains memif-cni into the node's CNI configuration)")
	if _, err := kubectl(ctx, c, say, "", "apply", "-k", "manifests/"); err != nil {
		return err
	}
	if _, err := kubectl(ctx, c, say, "", "-n", "memifnet-system", "rollout", "status", "ds/memifnet-node", "--timeout=3m"); err != nil {
		return err
	}
	// The rollout is done when the agent runs; its device plugin registers with the kubelet and
	// the node status shows the resources a moment later.
	if err := node.Poll(ctx, 90*time.Second, "node allocatable with memifnet.io/socket", func() (bool, error) {
		out, err := c.KubectlCmd(ctx, "get", "node", cluster.NodeName, "-o", `jsonpath={.status.allocatable.memifnet\.io/socket}`).Output()
		n := strings.TrimSpace(string(out))
		return err == nil && n != "" && n != "0", nil
	}); err != nil {
		return err
	}
	if _, err := kubectl(ctx, c, say, "", "get", "node", cluster.NodeName, "-o",
		`jsonpath={"memifnet.io/socket: "}{.status.allocatable.memifnet\.io/socket}{"\nmemifnet.io/hugepool: "}{.status.allocatable.memifnet\.io/hugepool}{"\n"}`); err != nil {
		return err
	}

	say("and the admission webhook memif-webhook (2 replicas): it turns the memifnet.io/ports annotation into limits and keeps a link's pods on one node")
	if _, err := kubectl(ctx, c, say, "", "-n", "memifnet-system", "rollout", "status", "deploy/memifnet-webhook", "--timeout=3m"); err != nil {
		return err
	}
	// Annotated pods are refused until the API server reaches a replica (failurePolicy Fail):
	// wait for a server-side dry run of the example to pass.
	if err := node.Poll(ctx, 90*time.Second, "the API server calls the webhook", func() (bool, error) {
		out, err := c.KubectlCmd(ctx, "apply", "--dry-run=server", "-f", "manifests/examples/link-pods.yaml").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, out)
		}
		return true, nil
	}); err != nil {
		return err
	}

	say("the example: two pods joined by the memif link demo-link; memif-cni wires them, memif-perf sends 1500-byte frames and verifies every byte")
	if _, err := kubectl(ctx, c, say, "", "apply", "-f", "manifests/examples/link-pods.yaml"); err != nil {
		return err
	}
	for _, p := range []string{"memif-tx", "memif-rx"} {
		if err := c.WaitPodSucceeded(ctx, "default", p, 3*time.Minute); err != nil {
			return err
		}
	}
	if log, err := c.Logs(ctx, "default", "memif-rx"); err == nil {
		say("$ kubectl logs memif-rx | grep -E '^rx_pkts=|corrupt='\n          %s\n          %s",
			grep(log, "rx_pkts=", true), grep(log, "corrupt=", false))
	}
	if _, err := kubectl(ctx, c, say, "", "delete", "-f", "manifests/examples/link-pods.yaml", "--wait=true"); err != nil {
		return err
	}

	sum, err := pair(ctx, c, say, "demo-echo", "demo-txrx", "demo-tput",
		[]string{"--mode=echo", "--verify", fmt.Sprintf("--duration=%ds", seconds+3)},
		[]string{"--mode=txrx", "--verify", "--size=64", fmt.Sprintf("--duration=%ds", seconds)})
	if err != nil {
		return err
	}
	say("THROUGHPUT: %.2f Mpps each way (64-byte frames, every byte verified, %.0f packets, %.0f verify errors)",
		sum["rx_mpps"], sum["rx_pkts"], sum["verify_errors"])

	sum, err = pair(ctx, c, say, "demo-pong", "demo-ping", "demo-rtt",
		[]string{"--mode=echo", "--duration=6s"},
		[]string{"--mode=ping", "--verify", "--duration=3s"})
	if err != nil {
		return err
	}
	say("LATENCY: round trip p50 %.1f us, p99 %.1f us, p99.9 %.1f us (%.0f pings, pod to pod over memif)",
		sum["rtt_p50_us"], sum["rtt_p99_us"], sum["rtt_p999_us"], sum["samples"])
	return nil
}

// pair runs a server pod a and a client pod b on link, waits for both, and returns the client's
// summary.
func pair(ctx context.Context, c *cluster.Cluster, say func(string, ...any), a, b, link string, aArgs, bArgs []string) (map[string]float64, error) {
	say("pods %s and %s on memif link %q, each asking for memifnet.io/socket: 1 and memifnet.io/hugepool: 1 (%s: %s; %s: %s)",
		a, b, link, a, strings.Join(aArgs, " "), b, strings.Join(bArgs, " "))
	// Most of a core each: both busy-poll, and the node has two.
	pods := cluster.PerfPod(a, "east", link, "900m", aArgs...) + "---\n" + cluster.PerfPod(b, "west", link, "900m", bArgs...)
	if _, err := kubectl(ctx, c, say, pods, "apply", "-f", "-"); err != nil {
		return nil, err
	}
	var sums []map[string]float64
	for _, p := range []string{b, a} { // the client ends first
		if err := c.WaitPodSucceeded(ctx, "default", p, 3*time.Minute); err != nil {
			log, _ := c.Logs(ctx, "default", p)
			return nil, fmt.Errorf("%w\n%s", err, log)
		}
		log, err := c.Logs(ctx, "default", p)
		if err != nil {
			return nil, err
		}
		sum, ok := node.Summary(log)
		if !ok {
			return nil, fmt.Errorf("%s: no summary in its log:\n%s", p, log)
		}
		if up := grep(log, "link up", false); up != "" && p == b {
			say("%s: %s", p, strings.TrimPrefix(up, "memif-perf: "))
		}
		sums = append(sums, sum)
	}
	if _, err := kubectl(ctx, c, say, "", "delete", "pod", a, b, "--wait=true"); err != nil {
		return nil, err
	}
	return sums[0], nil
}

// grep is the first line of log containing s (starting with it, if prefix).
func grep(log, s string, prefix bool) string {
	for _, l := range strings.Split(log, "\n") {
		if prefix && strings.HasPrefix(l, s) || !prefix && strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
