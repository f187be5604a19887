//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// Two slots and two pool units: the second pair of pods must reuse the first pair's slots.
const pluginConfig = `socketSlots: 2
pools:
  - name: hugepool
    pageSize: 2Mi
    unitSize: 16Mi
    unitsPerNUMANode: 2
`

// kubeletBinary is $MEMIFNET_KUBELET, else the kubelet of what hack/build-kube.sh builds (or
// reuses).
func kubeletBinary(t *testing.T) string {
	t.Helper()
	if k := os.Getenv("MEMIFNET_KUBELET"); k != "" {
		return k
	}
	cmd := exec.Command(filepath.Join(repoRoot(t), "hack", "build-kube.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/build-kube.sh: %v", err)
	}
	return filepath.Join(strings.TrimSpace(lastLine(string(out))), "kubelet")
}

// sandboxOf waits for the kubelet's sandbox of static pod name and returns its ID.
func sandboxOf(ctx context.Context, t *testing.T, s *node.Stack, name string) string {
	t.Helper()
	id, err := s.WaitSandbox(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func waitRunning(ctx context.Context, t *testing.T, s *node.Stack, names ...string) {
	t.Helper()
	for _, n := range names {
		err := node.Poll(ctx, 90*time.Second, n+" Running", func() (bool, error) {
			p, err := s.KubeletPod(ctx, n)
			if err != nil {
				return false, err
			}
			if p.Status.Phase == corev1.PodFailed {
				t.Fatalf("pod %s failed: %s %s", n, p.Status.Reason, p.Status.Message)
			}
			return p.Status.Phase == corev1.PodRunning, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// podSlot asks the kubelet's PodResources which slot the pod got (the device plugin's Allocate).
func podSlot(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	ids, err := node.PodSlots(ctx, name)
	if err != nil || len(ids) != 1 {
		t.Fatalf("PodResources for %s: %q, %v; want one slot", name, ids, err)
	}
	return ids[0]
}

// Tier 2: the real kubelet calls the real device plugin's Allocate, containerd calls memif-cni,
// which asks the kubelet's PodResources for the slots; two static pods pass verified traffic over
// their link, also across a kubelet crash; deleting them leaves nothing behind, and the next
// pods on the same slots see nothing of them.
func TestTier2Kubelet(t *testing.T) {
	kubelet := kubeletBinary(t)
	s := newStack(t, "/run/memifnet-e2e-t2")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := s.ClaimKubeletDirs(); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureHugepages(16); err != nil {
		t.Fatal(err)
	}
	if err := s.StartContainerd(ctx, s.MemifCNI(names.KubeletDir)); err != nil {
		t.Fatal(err)
	}
	if err := s.StartKubelet(ctx, kubelet); err != nil {
		t.Fatal(err)
	}
	if err := s.StartPlugin(ctx, pluginConfig, 2); err != nil {
		t.Fatal(err)
	}
	regSeries := `memifnet_deviceplugin_registrations_total{resource="memifnet.io/socket"}`
	regs, err := s.PluginMetric(ctx, regSeries)
	if err != nil {
		t.Fatal(err)
	}

	// Round 1: echo server side and a verifying sender that runs across a kubelet crash.
	east := node.PerfPod("t2-east", "east", "t2-link", "--mode", "echo", "--verify", "--size", "1500", "--duration", "0")
	west := node.PerfPod("t2-west", "west", "t2-link", "--mode", "txrx", "--verify", "--size", "1500", "--duration", "25s")
	for _, p := range []*corev1.Pod{east, west} {
		if err := s.WritePod(p); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(ctx, t, s, "t2-east", "t2-west")
	eastSB, westSB := sandboxOf(ctx, t, s, "t2-east"), sandboxOf(ctx, t, s, "t2-west")
	slots := map[string]string{"east": podSlot(ctx, t, "t2-east"), "west": podSlot(ctx, t, "t2-west")}
	if slots["east"] == slots["west"] {
		t.Fatalf("both pods got slot %s", slots["east"])
	}
	s.Logf("allocated: t2-east holds %s, t2-west holds %s (PodResources)", slots["east"], slots["west"])
	for port, slot := range slots {
		spec, err := portspec.Read(filepath.Join(s.StateDir(), "sockets", slot, "port.json"))
		if err != nil || spec.Name != port || spec.Link != "t2-link" {
			t.Fatalf("port.json in %s: %+v, %v", slot, spec, err)
		}
		s.Logf("attached: port %s on %s as memif %s (%s)", port, slot, spec.Role, spec.Socket)
	}

	progress := func() float64 {
		st, err := s.CRI.ContainerOf(ctx, westSB, "perf")
		if err != nil {
			return -1
		}
		l, _ := node.Log(st)
		return node.LastProgressRx(l)
	}
	if err := node.Poll(ctx, 60*time.Second, "t2-west receiving", func() (bool, error) { return progress() > 0, nil }); err != nil {
		t.Fatal(err)
	}
	before := progress()
	s.Logf("connected: t2-west has %.0f packets back, verified", before)

	eastCtr, err := s.CRI.ContainerOf(ctx, eastSB, "perf")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.KillKubelet(ctx, kubelet); err != nil {
		t.Fatal(err)
	}
	// The kubelet wiped device-plugins/ on start: the plugin must notice and register again.
	if err := node.Poll(ctx, 30*time.Second, "device plugin re-registered", func() (bool, error) {
		n, err := s.PluginMetric(ctx, regSeries)
		return n > regs, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Poll(ctx, 30*time.Second, "slots allocatable again", func() (bool, error) {
		ids, err := node.Allocatable(ctx, filepath.Join(names.KubeletDir, names.PodResourcesSocket), names.SocketResource)
		return len(ids) == 2, err
	}); err != nil {
		t.Fatal(err)
	}
	s.Logf("re-registered: the device plugin is back with the new kubelet")
	afterRestart := progress()
	if err := node.Poll(ctx, 30*time.Second, "traffic after the kubelet restart", func() (bool, error) {
		return progress() > afterRestart, nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Logf("traffic kept flowing across the kubelet restart (%.0f -> %.0f packets)", before, progress())

	w := waitExited(ctx, t, s, westSB, "perf", 90*time.Second)
	checkVerified(t, "t2-west (txrx)", w)
	// The echo side is the same container as before the restart, still running.
	if st, err := s.CRI.ContainerOf(ctx, eastSB, "perf"); err != nil || st.Id != eastCtr.Id || st.State != cri.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("t2-east's container after the kubelet restart: %v %v", st, err)
	}
	s.Logf("t2-west: %.3f Mpps each way over %.0f verified packets", w.summary["rx_mpps"], w.summary["rx_pkts"])

	// Delete the pods: the kubelet stops the sandboxes (DEL with netns); then remove them (DEL
	// without netns, as the kubelet's sandbox GC would, later).
	for _, n := range []string{"t2-east", "t2-west"} {
		if err := s.RemovePod(n); err != nil {
			t.Fatal(err)
		}
	}
	e := waitExited(ctx, t, s, eastSB, "perf", 60*time.Second)
	checkVerified(t, "t2-east (echo)", e)
	for _, sb := range []string{eastSB, westSB} {
		if err := node.Poll(ctx, 60*time.Second, "sandbox stopped", func() (bool, error) {
			st, err := s.CRI.Runtime.PodSandboxStatus(ctx, &cri.PodSandboxStatusRequest{PodSandboxId: sb})
			return err == nil && st.Status.State == cri.PodSandboxState_SANDBOX_NOTREADY, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventuallyNoLeftovers(ctx, t, s, "after the kubelet stopped the sandboxes")
	for _, sb := range []string{eastSB, westSB} {
		if _, err := s.CRI.Runtime.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
			t.Fatalf("RemovePodSandbox (DEL without netns): %v", err)
		}
	}
	noLeftovers(t, s, "after RemovePodSandbox")
	s.Logf("deleted: nothing of the pods is left")

	// Round 2: two new pods on a new link get the same two slots (there are no others); the
	// device plugin scrubbed them, so each slot holds only the new port.
	north := node.PerfPod("t2-north", "north", "t2-link-b", "--mode", "echo", "--verify", "--duration", "4s")
	south := node.PerfPod("t2-south", "south", "t2-link-b", "--mode", "txrx", "--verify", "--duration", "2s")
	for _, p := range []*corev1.Pod{north, south} {
		if err := s.WritePod(p); err != nil {
			t.Fatal(err)
		}
	}
	northSB, southSB := sandboxOf(ctx, t, s, "t2-north"), sandboxOf(ctx, t, s, "t2-south")
	for _, n := range []string{"t2-north", "t2-south"} {
		slot := podSlot(ctx, t, n)
		if slot != slots["east"] && slot != slots["west"] {
			t.Fatalf("%s got %s, not a reused slot", n, slot)
		}
		entries, err := s.SlotEntries(slot)
		if err != nil {
			t.Fatal(err)
		}
		// What ADD writes for the new pod (port.json and the ready configs beside it, docs/peers.md),
		// nothing the old tenant left.
		if want := []string{"dpdk.app-args", "dpdk.args", "link", "port.env", "port.json", "vpp.cli"}; !slices.Equal(entries, want) {
			t.Errorf("%s's slot %s holds %q, want only %q", n, slot, entries, want)
		}
		spec, err := portspec.Read(filepath.Join(s.StateDir(), "sockets", slot, "port.json"))
		if err != nil || spec.Link != "t2-link-b" {
			t.Errorf("%s's slot %s: port.json %+v, %v; want the new link", n, slot, spec, err)
		}
	}
	checkVerified(t, "t2-south (txrx)", waitExited(ctx, t, s, southSB, "perf", 90*time.Second))
	checkVerified(t, "t2-north (echo)", waitExited(ctx, t, s, northSB, "perf", 90*time.Second))
	for _, n := range []string{"t2-north", "t2-south"} {
		if err := s.RemovePod(n); err != nil {
			t.Fatal(err)
		}
	}

	hostilePodRecreatesItsSandbox(ctx, t, s)
}

// hostilePodRecreatesItsSandbox is attack 1 of docs/security.md on the real kubelet: a pod plants
// symlinks to a host file where memif-cni writes port.json, and a dangling one, then ends its
// own pause process (it shares its process namespace); the kubelet re-creates the sandbox (a new
// ADD, no new Allocate). The host file must be untouched, nothing created where the dangling
// link points, and the pod's port.json a real file again.
func hostilePodRecreatesItsSandbox(ctx context.Context, t *testing.T, s *node.Stack) {
	victim, dangling := s.Path("host", "shadow"), s.Path("host", "created-by-pod")
	secret := []byte("host secret\n")
	if err := os.MkdirAll(filepath.Dir(victim), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	slot := "/run/memifnet/{slot}/"
	script := strings.Join([]string{
		"unless " + slot + "planted", // after the sandbox is re-created the container starts again
		"symlink " + victim + " " + slot + "port.json.tmp",
		"remove " + slot + "port.json",
		"symlink " + victim + " " + slot + "port.json",
		"symlink " + dangling + " " + slot + "memif.sock.tmp",
		"write " + slot + "planted done",
		"kill 1 TERM", // the shared-namespace pause process: the sandbox goes
	}, "; ")
	if err := s.WritePod(node.HostilePod("t2-mallory", script)); err != nil {
		t.Fatal(err)
	}
	first := sandboxOf(ctx, t, s, "t2-mallory")
	var second string
	if err := node.Poll(ctx, 90*time.Second, "t2-mallory's sandbox re-created", func() (bool, error) {
		sbs, err := s.CRI.Sandboxes(ctx, "t2-mallory-"+node.NodeName)
		for _, sb := range sbs {
			if sb.Id != first && sb.State == cri.PodSandboxState_SANDBOX_READY {
				second = sb.Id
				return true, nil
			}
		}
		return false, err
	}); err != nil {
		t.Fatal(err)
	}
	waitRunning(ctx, t, s, "t2-mallory")
	s.Logf("t2-mallory planted its symlinks and ended its pause process: sandbox %.12s re-created as %.12s", first, second)
	slotID := podSlot(ctx, t, "t2-mallory")
	if b, err := os.ReadFile(victim); err != nil || !bytes.Equal(b, secret) {
		t.Fatalf("the host file the pod pointed at changed: %q %v", b, err)
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the host file's mode changed: %v %v", fi, err)
	}
	if _, err := os.Lstat(dangling); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dangling symlink made memif-cni create %s: %v", dangling, err)
	}
	portFile := filepath.Join(s.StateDir(), "sockets", slotID, "port.json")
	if fi, err := os.Lstat(portFile); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("port.json after the re-created sandbox's ADD: %v %v", fi, err)
	}
	if spec, err := portspec.Read(portFile); err != nil || spec.Name != "west" || spec.Peer != "host" {
		t.Fatalf("port.json: %+v %v", spec, err)
	}
	s.Logf("the re-created sandbox's ADD replaced the planted symlinks; the host file is untouched")
	if err := s.RemovePod("t2-mallory"); err != nil {
		t.Fatal(err)
	}
	// What the pod planted in its own slot stays there until the slot's next scrub.
}
