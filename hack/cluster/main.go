// Command cluster brings a real Kubernetes cluster of one or more nodes up on this machine, or
// down (`make cluster-up [NODES=3] [CNI_PATHS=k3s]`, `make cluster-down`; see docs/e2e.md and
// test/e2e/cluster).
//
//	cluster up     build what is missing, start the cluster (or check the running one), print
//	               KUBECONFIG=<path> and KUBECTL=<path> as the last lines
//	cluster down   stop every process and undo every host change
//	cluster build  only build (or reuse) what a cluster runs, and print where it is
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/test/e2e/cluster"
)

func main() {
	base := flag.String("base", cluster.DefaultBase, "the cluster's directory")
	nodes := flag.Int("nodes", 1, fmt.Sprintf("up: how many nodes (1 to %d; node 1 is this machine, the others namespaces of it)", cluster.MaxNodes))
	pathsName := flag.String("cni-paths", "kubeadm", "up: the nodes' CNI dirs and kubelet kubeconfig, as components/cni-paths/<name> sets them: kubeadm or k3s")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [--base DIR] [--nodes N] [--cni-paths NAME] up|down|build\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if *nodes < 1 || *nodes > cluster.MaxNodes {
		fatal(fmt.Errorf("--nodes %d: want 1 to %d", *nodes, cluster.MaxNodes))
	}
	paths, ok := cluster.Presets[*pathsName]
	if !ok {
		fatal(fmt.Errorf("--cni-paths %q: want kubeadm or k3s", *pathsName))
	}
	start := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "[cluster %5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	repo, err := os.Getwd()
	if err != nil {
		fatal(err)
	}
	switch flag.Arg(0) {
	case "up":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := up(ctx, repo, *base, *nodes, paths, logf)
		if err != nil && ctx.Err() != nil {
			logf("interrupted: taking the cluster down")
			err = errors.Join(err, cluster.New(repo, *base, cluster.Inputs{}, logf).Down())
		}
		if err != nil {
			fatal(err)
		}
	case "build":
		in, err := cluster.Build(context.Background(), repo, os.Stderr)
		if err != nil {
			fatal(err)
		}
		fmt.Printf("kube: %s\ncontainerd: %s\nmultus: %s\nimage: %s\n", in.KubeDir, in.ContainerdDir, in.MultusDir, in.Image)
	case "down":
		if err := cluster.New(repo, *base, cluster.Inputs{}, logf).Down(); err != nil {
			fatal(err)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func up(ctx context.Context, repo, base string, nodes int, paths cluster.Paths, logf func(string, ...any)) error {
	logf("building or reusing kube (kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd), containerd, multus and the memifnet image")
	in, err := cluster.Build(ctx, repo, os.Stderr)
	if err != nil {
		return err
	}
	c := cluster.New(repo, base, in, logf)
	c.NodeCount, c.Paths = nodes, paths
	if err := c.Up(ctx); err != nil {
		return fmt.Errorf("%w\n(`make cluster-down` removes what was started)", err)
	}
	fmt.Printf("logs: %s\nKUBECONFIG=%s\nKUBECTL=%s\n", c.LogDir(), c.Kubeconfig(), c.Kubectl())
	return nil
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
	os.Exit(1)
}
