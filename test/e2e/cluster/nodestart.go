package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// inNode is the command line that runs args in the namespaces of the node whose holder is pid
// (nsenter execs args: the PID is the program's).
func inNode(pid int, args ...string) []string {
	return append([]string{"nsenter", "-t", strconv.Itoa(pid), "-m", "-n", "--"}, args...)
}

// writeNodeCredentials writes node s's kubelet certificates (a client certificate for
// system:node:<address> in system:nodes, a serving certificate for its address, both from the
// cluster CA) and its kubeconfig at the cluster's Paths, in the node's own view: the
// server is the `kubernetes` Service, which the node's network sends to the API server.
func (c *Cluster) writeNodeCredentials(s NodeSpec) error {
	p := c.pki()
	ca, err := loadCA(p)
	if err != nil {
		return err
	}
	ip := net.ParseIP(s.Name)
	for name, spec := range map[string]certSpec{
		nodeCert(s.Index, "kubelet"): {cn: "system:node:" + s.Name, orgs: []string{"system:nodes"}},
		nodeCert(s.Index, "kubelet-serving"): {cn: "system:node:" + s.Name, orgs: []string{"system:nodes"}, server: true,
			ips: []net.IP{ip}},
	} {
		crt, key, err := ca.issue(spec)
		if err != nil {
			return fmt.Errorf("certificate %s: %w", name, err)
		}
		if err := writePair(p.Dir, name, crt, key); err != nil {
			return err
		}
	}
	kc, err := kubeconfig(p, "https://"+ServiceIP+":443", nodeCert(s.Index, "kubelet"))
	if err != nil {
		return err
	}
	return os.WriteFile(c.NodeRoot(s.Index, c.Paths.KubeletKubeconfig), kc, 0o600)
}

func nodeCert(i int, what string) string { return fmt.Sprintf("node%d-%s", i, what) }

// startContainerdOn starts node i's containerd in its namespaces, with every path of its own
// under the node's directory; the CNI and CDI directories are the standard ones, which are the
// node's own there.
func (c *Cluster) startContainerdOn(ctx context.Context, i, holder int) error {
	dir := filepath.Join(c.NodeDir(i), "containerd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pause, err := tarballTag(c.In.PauseImage)
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig(dir, pause, c.Paths)), 0o644); err != nil {
		return err
	}
	env := []string{"PATH=" + c.In.ContainerdDir + ":" + os.Getenv("PATH")}
	d, err := c.start(daemonName(i, "containerd"), env, inNode(holder, filepath.Join(c.In.ContainerdDir, "containerd"), "--config", cfg)...)
	if err != nil {
		return err
	}
	return waitCRI(ctx, d, c.ContainerdSockOf(i))
}

// waitCRI waits until containerd d answers CRI at sock.
func waitCRI(ctx context.Context, d *Daemon, sock string) error {
	return node.Poll(ctx, 60*time.Second, d.Name+" CRI", func() (bool, error) {
		if !d.Alive() {
			return false, fmt.Errorf("%s exited (see %s)", d.Name, d.Log)
		}
		cr, err := node.DialCRI(ctx, sock)
		if err != nil {
			return false, err
		}
		cr.Close()
		return true, nil
	})
}

// startNodeKubelet starts node s's kubelet in its namespaces: serving on the node's address,
// its pods under its own cgroup root, registering as its address, and waits for it Ready.
func (c *Cluster) startNodeKubelet(ctx context.Context, s NodeSpec, holder int) error {
	dir := filepath.Join(c.NodeDir(s.Index), "kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := c.pki().Path
	cfg := node.KubeletConfig{ContainerdSock: c.ContainerdSockOf(s.Index), Address: s.Name,
		CgroupRoot: "/" + nodeCgroup(s.Index), TLS: &node.KubeletTLS{
			CertFile: p(nodeCert(s.Index, "kubelet-serving") + ".crt"), KeyFile: p(nodeCert(s.Index, "kubelet-serving") + ".key"),
			ClientCAFile: p("ca.crt"),
		}}.YAML()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		return err
	}
	name := daemonName(s.Index, "kubelet")
	if _, err := c.start(name, nil, inNode(holder, c.kube("kubelet"),
		"--config="+file, "--kubeconfig="+c.Paths.KubeletKubeconfig,
		"--root-dir="+names.KubeletDir, "--hostname-override="+s.Name, "--node-ip="+s.Name,
		"--containerd="+c.ContainerdSockOf(s.Index), "--v=2")...); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, s.Name, name, 120*time.Second)
}

// stopExtraNodes stops the nodes after the first, newest first: the kubelet, every pod sandbox
// through its CRI (CNI DEL runs in the node), containerd and its shims, then the holder, with
// which the node's namespaces and every mount in them go.
func (c *Cluster) stopExtraNodes(byName map[string]*Daemon) []error {
	var errs []error
	stop := func(name string, grace time.Duration) {
		if d := byName[name]; d != nil {
			if err := d.Stop(sigterm, grace); err != nil {
				errs = append(errs, err)
			}
		}
	}
	nodes := c.state.Nodes
	for k := len(nodes) - 1; k >= 1; k-- {
		i := nodes[k].Index
		stop(daemonName(i, "kubelet"), 20*time.Second)
		if d := byName[daemonName(i, "containerd")]; d != nil && d.Alive() {
			if err := removeSandboxes(c.ContainerdSockOf(i)); err != nil {
				errs = append(errs, fmt.Errorf("node %d: %w", i, err))
			}
		}
		stop(daemonName(i, "containerd"), 30*time.Second)
		for _, pid := range processesWith("containerd-shim", c.ContainerdSockOf(i)) {
			killPID(pid)
		}
		stop(daemonName(i, "holder"), 10*time.Second)
	}
	return errs
}

// removeSandboxes removes every pod sandbox of the containerd at sock through CRI.
func removeSandboxes(sock string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cr, err := node.DialCRI(ctx, sock)
	if err != nil {
		return fmt.Errorf("containerd CRI: %w", err)
	}
	defer cr.Close()
	if err := cr.RemoveAll(ctx); err != nil {
		return fmt.Errorf("remove pod sandboxes: %w", err)
	}
	return nil
}
