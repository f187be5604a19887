package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/test/e2e/node"
)

// A node after the first can be lost and come back, as a machine that crashes: StopNode kills
// everything that runs on it, StartNode starts its containerd and kubelet again. The holder
// stays up meanwhile: its network and mount namespaces are the machine's disks and wires, which
// a crashed machine finds again as they were (its tmpfs mounts included: this is a crash of the
// node's software, not a power cycle).

// StopNode takes node i (>= 2) down with no warning: its kubelet and containerd are SIGKILLed,
// then every containerd shim of the node and every process in the node's cgroup root (its pods'
// containers, the agent's among them). Nothing shuts down gracefully: no container is stopped, no
// CNI DEL runs, the API server is not told; the node's pods stay bound to it as they were.
func (c *Cluster) StopNode(i int) error {
	if _, err := c.extraNode(i); err != nil {
		return err
	}
	for _, comp := range []string{"kubelet", "containerd"} {
		if d := c.Daemon(daemonName(i, comp)); d != nil {
			if err := d.Stop(syscall.SIGKILL, 10*time.Second); err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
		}
	}
	for _, pid := range processesWith("containerd-shim", c.ContainerdSockOf(i)) {
		killPID(pid)
	}
	return killCgroup(nodeCgroup(i), 30*time.Second)
}

// StartNode brings node i back after StopNode: its containerd, which finds its images and the
// dead pods' sandboxes where it left them, then its kubelet; it waits until the node is Ready.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	s, err := c.extraNode(i)
	if err != nil {
		return err
	}
	holder := c.Daemon(daemonName(i, "holder"))
	if holder == nil || !holder.Alive() {
		return fmt.Errorf("node %d: its holder is gone (the node's namespaces with it)", i)
	}
	for _, comp := range []string{"containerd", "kubelet"} {
		if d := c.Daemon(daemonName(i, comp)); d != nil && d.Alive() {
			return fmt.Errorf("node %d: %s (pid %d) still runs", i, d.Name, d.PID)
		}
	}
	if err := c.startContainerdOn(ctx, i, holder.PID); err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	if err := c.startNodeKubelet(ctx, s, holder.PID); err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	return nil
}

// extraNode is node i of the cluster that is up, a node after the first.
func (c *Cluster) extraNode(i int) (NodeSpec, error) {
	for _, s := range c.Nodes() {
		if s.Index == i && i >= 2 {
			return s, nil
		}
	}
	return NodeSpec{}, fmt.Errorf("node %d: not a node after the first of this cluster", i)
}

// killCgroup SIGKILLs every process in cgroup root name (and below) of every hierarchy until
// none is left: a process may fork while the others die.
func killCgroup(name string, timeout time.Duration) error {
	var left []int
	err := node.Poll(context.Background(), timeout, "processes of cgroup "+name+" killed", func() (bool, error) {
		left = cgroupPIDs(name)
		for _, pid := range left {
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				unix.Close(fd)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w: pids %v", err, left)
	}
	return nil
}

// cgroupPIDs lists the live processes in cgroup root name and below, in every hierarchy.
func cgroupPIDs(name string) []int {
	seen := map[int]bool{}
	var out []int
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, name), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil || seen[pid] {
					continue
				}
				seen[pid] = true
				if _, err := procStart(pid); err == nil {
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}
