//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/memifnet/memifnet/internal/kubeletfake"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/internal/tmpfs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// Tier 1: memif-cni-install chains memif-cni (with the pod-annotations capability) after bridge
// in containerd's conflist, as the DaemonSet does on a node; containerd itself runs the chain for
// two pod sandboxes made through CRI with the memifnet.io/ports annotation; the two containers
// run memif-perf --port over the link and verify every byte. No kubelet: a PodResources
// stand-in says which slot each pod holds, and the containers get the slot mounts the device
// plugin would have returned. At the end the installer takes memif-cni out again.
func TestTier1ContainerdCNI(t *testing.T) {
	s := newStack(t, "/run/memifnet-e2e-t1")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	kubeletDir := s.Path("kubelet")
	pr := kubeletfake.New()
	pr.ServePodResources(t, kubeletDir)
	// The slots as the device plugin leaves clean ones: each its own small tmpfs, mode 0777
	// (memif-cni refuses a slot that is not a mount point). The stack's teardown unmounts them.
	slots := []string{"slot-000", "slot-001"}
	socketsDir := filepath.Join(s.StateDir(), names.SocketsSubdir)
	if err := os.MkdirAll(socketsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sockets, err := safefs.Open(socketsDir)
	if err != nil {
		t.Fatal(err)
	}
	defer sockets.Close()
	for _, slot := range slots {
		if _, err := sockets.Mkdir(slot, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := sockets.MountTmpfs(slot, safefs.TmpfsOptions{Source: "memifnet-slot", Limits: tmpfs.Limits{Size: 1 << 20, Inodes: 64}, Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StartContainerd(ctx, nil); err != nil { // bridge only
		t.Fatal(err)
	}
	plugin, err := json.Marshal(s.MemifCNI(kubeletDir))
	if err != nil {
		t.Fatal(err)
	}
	install := func(args ...string) {
		t.Helper()
		out, err := exec.CommandContext(ctx, s.Bin("memif-cni-install"), append([]string{"--source", s.Bin("memif-cni"),
			"--cni-bin-dir", s.CNIBinDir(), "--cni-conf-dir", filepath.Dir(s.Conflist())}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("memif-cni-install %q: %v\n%s", args, err, out)
		}
	}
	install("--chain", "--plugin-config", string(plugin))
	if err := node.Poll(ctx, 30*time.Second, "containerd loaded the chained conflist", func() (bool, error) {
		return s.CNILoaded(ctx, "memif-cni")
	}); err != nil {
		t.Fatal(err)
	}
	s.Logf("memif-cni-install put memif-cni into %s after bridge; containerd reloaded it", filepath.Base(s.Conflist()))

	type pod struct {
		name, port, slot, role string
		args                   []string
		sandbox                string
		cfg                    *cri.PodSandboxConfig
	}
	pods := []*pod{
		// The first pod to attach is the link's server.
		{name: "t1-east", port: "east", slot: slots[0], role: "server",
			args: []string{"--mode", "echo", "--verify", "--size", "1500", "--duration", "6s"}},
		{name: "t1-west", port: "west", slot: slots[1], role: "client",
			args: []string{"--mode", "txrx", "--verify", "--size", "1500", "--duration", "3s"}},
	}
	for i, p := range pods {
		uid := "00000000-0000-4000-8000-00000000000" + string(rune('1'+i))
		pr.SetPod(kubeletfake.Pod{Namespace: "default", Name: p.name, UID: uid, Devices: map[string][]string{names.SocketResource: {p.slot}}})
		p.cfg = &cri.PodSandboxConfig{
			Metadata:     &cri.PodSandboxMetadata{Name: p.name, Namespace: "default", Uid: uid},
			Hostname:     p.name,
			LogDirectory: s.Path("podlogs", p.name),
			Annotations:  map[string]string{"memifnet.io/ports": p.port + "@t1-link"},
			Labels:       map[string]string{"memifnet.io/e2e": "tier1"},
		}
		began := time.Now()
		r, err := s.CRI.Runtime.RunPodSandbox(ctx, &cri.RunPodSandboxRequest{Config: p.cfg})
		if err != nil {
			t.Fatalf("RunPodSandbox %s: %v", p.name, err)
		}
		p.sandbox = r.PodSandboxId
		s.Logf("pod %s: sandbox %.12s up in %.2fs (containerd ran bridge + memif-cni ADD)", p.name, p.sandbox, time.Since(began).Seconds())

		// What ADD did, seen from the host: port.json in the slot with the right role, and the
		// link directory bind-mounted on the slot's link/.
		spec, err := portspec.Read(filepath.Join(s.StateDir(), "sockets", p.slot, "port.json"))
		if err != nil {
			t.Fatalf("after ADD of %s: %v", p.name, err)
		}
		if spec.Name != p.port || spec.Role != p.role || spec.Link != "t1-link" ||
			spec.Socket != "/run/memifnet/"+p.slot+"/link/memif.sock" {
			b, _ := json.Marshal(spec)
			t.Fatalf("port.json of %s: %s; want port %s, role %s, link t1-link, socket in /run/memifnet/%s/link", p.name, b, p.port, p.role, p.slot)
		}
		if mps, _ := testutil.Mounts(filepath.Join(s.StateDir(), "sockets", p.slot, "link")); len(mps) != 1 {
			t.Fatalf("after ADD of %s: mounts on the slot's link/: %q, want one", p.name, mps)
		}
	}
	for _, p := range pods {
		cc, err := s.CRI.Runtime.CreateContainer(ctx, &cri.CreateContainerRequest{
			PodSandboxId: p.sandbox, SandboxConfig: p.cfg,
			Config: &cri.ContainerConfig{
				Metadata: &cri.ContainerMetadata{Name: "perf"},
				Image:    &cri.ImageSpec{Image: node.Image},
				Command:  []string{"/usr/local/bin/memif-perf"},
				Args:     append([]string{"--port", p.port, "--connect-timeout", "30s"}, p.args...),
				// What the device plugin's Allocate returns for the slot.
				Mounts:  []*cri.Mount{{ContainerPath: "/run/memifnet/" + p.slot, HostPath: filepath.Join(s.StateDir(), "sockets", p.slot)}},
				Envs:    []*cri.KeyValue{{Key: "MEMIFNET_SOCKETS", Value: p.slot}},
				LogPath: "perf.log",
			},
		})
		if err != nil {
			t.Fatalf("CreateContainer in %s: %v", p.name, err)
		}
		if _, err := s.CRI.Runtime.StartContainer(ctx, &cri.StartContainerRequest{ContainerId: cc.ContainerId}); err != nil {
			t.Fatalf("StartContainer in %s: %v", p.name, err)
		}
	}
	west := waitExited(ctx, t, s, pods[1].sandbox, "perf", 60*time.Second)
	east := waitExited(ctx, t, s, pods[0].sandbox, "perf", 60*time.Second)
	checkVerified(t, "west (txrx)", west)
	checkVerified(t, "east (echo)", east)
	s.Logf("traffic: west sent %.0f, got %.0f back verified (%.3f Mpps each way)", west.summary["tx_pkts"], west.summary["rx_pkts"], west.summary["rx_mpps"])

	// Stop sends DEL with the netns, Remove another without it: both must succeed, and after
	// them nothing of the pods is left.
	for i, p := range pods {
		if _, err := s.CRI.Runtime.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: p.sandbox}); err != nil {
			t.Fatalf("StopPodSandbox %s: %v", p.name, err)
		}
		if i == 0 {
			// The link's other end is still attached: its port.json and mount stay.
			if _, err := os.Stat(filepath.Join(s.StateDir(), "sockets", pods[1].slot, "port.json")); err != nil {
				t.Errorf("DEL of %s touched %s's port: %v", p.name, pods[1].name, err)
			}
		}
		if _, err := s.CRI.Runtime.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: p.sandbox}); err != nil {
			t.Fatalf("RemovePodSandbox %s (DEL without netns): %v", p.name, err)
		}
	}
	noLeftovers(t, s, "after Stop+RemovePodSandbox")

	install("--uninstall")
	if err := node.Poll(ctx, 30*time.Second, "containerd loaded the conflist without memif-cni", func() (bool, error) {
		loaded, err := s.CNILoaded(ctx, "memif-cni")
		return !loaded, err
	}); err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromFile(s.Conflist())
	if err != nil || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "bridge" {
		t.Fatalf("conflist after uninstall: %+v, %v; want bridge alone", list, err)
	}
	s.Logf("memif-cni-install --uninstall left bridge alone in the conflist")
}
