package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"

	"github.com/memifnet/memifnet/internal/kubeletfake"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/internal/tmpfs"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// pluginPkgs are the plugin and its helper, built as the Makefile and the image build them.
var pluginPkgs = []string{".", "../memif-cni-podinfo"}

// pluginDir holds memif-cni and memif-cni-podinfo, built once per test run.
func pluginDir(t testing.TB) string {
	t.Helper()
	return testutil.Built(t, testutil.Build{Pkgs: pluginPkgs})
}

// failpointDir holds them built with -tags failpoints.
func failpointDir(t testing.TB) string {
	t.Helper()
	return testutil.Built(t, testutil.Build{Tags: []string{"failpoints"}, Pkgs: pluginPkgs})
}

// newCNI returns a libcni client with its exec set up front: libcni creates a missing one lazily
// without a lock, which races when tests share a client across goroutines.
func newCNI(path []string, cacheDir string) *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir(path, cacheDir, &invoke.DefaultExec{
		RawExec:       &invoke.RawExec{Stderr: os.Stderr},
		PluginDecoder: version.PluginDecoder{},
	})
}

// node is one test node: state, kubelet and device-info directories under a temp dir, slot
// directories as the device plugin makes them, and a kubelet stand-in.
type node struct {
	t          testing.TB
	root       string
	stateDir   string
	kubeletDir string
	devinfoDir string
	kubelet    *kubeletfake.Kubelet
	cni        *libcni.CNIConfig
	extra      map[string]any // extra plugin config keys
	caps       bool           // declare the pod-annotations capability
	cniVersion string         // of the conflist; 1.1.0 unless a test sets it

	mu      sync.Mutex
	nextPod int
}

func newNode(t testing.TB, slots int) *node {
	t.Helper()
	testutil.RequireRoot(t, "bind mounts and network namespaces")
	root := t.TempDir()
	n := &node{t: t, root: root, stateDir: filepath.Join(root, "memifnet"), kubeletDir: filepath.Join(root, "kubelet"),
		devinfoDir: filepath.Join(root, "devinfo"), kubelet: kubeletfake.New(), extra: map[string]any{}, caps: true}
	// Never leave a mount behind, whatever the test did (registered first: runs last).
	t.Cleanup(func() { testutil.UnmountUnder(t, root) })
	for i := range slots {
		n.mountSlot(fmt.Sprintf("slot-%03d", i))
	}
	n.kubelet.ServePodResources(t, n.kubeletDir)
	n.cni = newCNI([]string{pluginDir(t)}, filepath.Join(root, "cache"))
	return n
}

func (n *node) slotDir(slot string) string { return filepath.Join(n.stateDir, "sockets", slot) }

// mountSlot gives slot a fresh tmpfs, as memif-deviceplugin does at a hand-out (replacing any
// tmpfs there before), and returns its identity.
func (n *node) mountSlot(slot string) safefs.Identity {
	n.t.Helper()
	d, err := safefs.MkdirAllOpen(filepath.Join(n.stateDir, "sockets"), 0o755)
	if err != nil {
		n.t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Unmount(slot, safefs.Identity{}); err != nil {
		n.t.Fatal(err)
	}
	if _, err := d.Mkdir(slot, 0o755); err != nil {
		n.t.Fatal(err)
	}
	id, err := d.MountTmpfs(slot, safefs.TmpfsOptions{Source: "memifnet-slot", Limits: tmpfs.Limits{Size: 1 << 20, Inodes: 64}, Mode: 0o777})
	if err != nil {
		n.t.Fatal(err)
	}
	return id
}

func (n *node) confList() *libcni.NetworkConfigList {
	n.t.Helper()
	plugin := map[string]any{"type": "memif-cni", "stateDir": n.stateDir, "kubeletDir": n.kubeletDir,
		"deviceInfoDir": n.devinfoDir, "kubeletURL": "none"}
	if n.caps {
		plugin["capabilities"] = map[string]bool{"io.kubernetes.cri.pod-annotations": true}
	}
	for k, v := range n.extra {
		plugin[k] = v
		if v == nil { // a key the base config sets, removed
			delete(plugin, k)
		}
	}
	version := n.cniVersion
	if version == "" {
		version = "1.1.0"
	}
	b, err := json.Marshal(map[string]any{"cniVersion": version, "name": "memifnet", "plugins": []any{plugin}})
	if err != nil {
		n.t.Fatal(err)
	}
	l, err := libcni.ConfListFromBytes(b)
	if err != nil {
		n.t.Fatal(err)
	}
	return l
}

// pod is one test pod with its own network namespace.
type pod struct {
	Namespace, Name, UID string
	ContainerID          string
	Annotation           string
	Slots                []string
	NS                   ns.NetNS
}

// newPod registers a pod holding nslots slots (taken in order) with the kubelet stand-in.
func (n *node) newPod(annotation string, slots ...string) *pod {
	n.t.Helper()
	n.mu.Lock()
	i := n.nextPod
	n.nextPod++
	n.mu.Unlock()
	netns, err := testutils.NewNS()
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { netns.Close(); _ = testutils.UnmountNS(netns) })
	p := &pod{Namespace: "default", Name: fmt.Sprintf("pod-%d", i), UID: fmt.Sprintf("uid-%d", i),
		ContainerID: fmt.Sprintf("sandbox%04d", i), Annotation: annotation, Slots: slots, NS: netns}
	anns := map[string]string{}
	if annotation != "" {
		anns["memifnet.io/ports"] = annotation
	}
	n.kubelet.SetPod(kubeletfake.Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Annotations: anns,
		Devices: map[string][]string{names.SocketResource: slots}})
	return p
}

func (p *pod) rt(withNetns bool) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: p.ContainerID, IfName: "net1",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", p.Namespace}, {"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.ContainerID}, {"K8S_POD_UID", p.UID}},
		CapabilityArgs: map[string]any{"io.kubernetes.cri.pod-annotations": p.annotations()},
	}
	if withNetns {
		rt.NetNS = p.NS.Path()
	}
	return rt
}

func (p *pod) annotations() map[string]string {
	m := map[string]string{"io.kubernetes.pod.name": p.Name}
	if p.Annotation != "" {
		m["memifnet.io/ports"] = p.Annotation
	}
	return m
}

func (n *node) add(p *pod) (*current.Result, error) {
	r, err := n.cni.AddNetworkList(context.Background(), n.confList(), p.rt(true))
	if err != nil {
		return nil, err
	}
	return current.NewResultFromResult(r)
}

func (n *node) mustAdd(p *pod) *current.Result {
	n.t.Helper()
	r, err := n.add(p)
	if err != nil {
		n.t.Fatalf("ADD %s: %v", p.Name, err)
	}
	return r
}

// del runs DEL as containerd's StopPodSandbox does (netns, cached prevResult).
func (n *node) del(p *pod) error {
	return n.cni.DelNetworkList(context.Background(), n.confList(), p.rt(true))
}

// delBare runs DEL as containerd's RemovePodSandbox does: no netns, and no cached result (the
// cache entry went with the first DEL, and this one uses a fresh cache).
func (n *node) delBare(p *pod) error {
	bare := newCNI([]string{pluginDir(n.t)}, filepath.Join(n.root, "cache-empty"))
	return bare.DelNetworkList(context.Background(), n.confList(), p.rt(false))
}

func (n *node) mustDel(p *pod) {
	n.t.Helper()
	if err := n.del(p); err != nil {
		n.t.Fatalf("DEL %s: %v", p.Name, err)
	}
}

// cniError extracts the plugin's coded error.
func cniError(t testing.TB, err error) *types.Error {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a CNI error", err, err)
	}
	return e
}

// assertClean checks that nothing the plugin makes is left on the node: no files in any slot, no
// link directories, no state records, no device-info files, no mounts.
func (n *node) assertClean() {
	n.t.Helper()
	var left []string
	slots, _ := os.ReadDir(filepath.Join(n.stateDir, "sockets"))
	for _, s := range slots {
		ents, _ := os.ReadDir(n.slotDir(s.Name()))
		for _, e := range ents {
			if e.Name() == names.StatusFile {
				// The pod's application wrote it (exchange opens its ports as an app does); DEL
				// leaves what the pod put in its slot to the slot's next scrub (del.go).
				continue
			}
			left = append(left, filepath.Join("sockets", s.Name(), e.Name()))
		}
	}
	for _, dir := range []string{filepath.Join(n.stateDir, "links"), filepath.Join(n.stateDir, "state"), filepath.Join(n.devinfoDir, "cni")} {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				left = append(left, path)
			}
			return nil
		})
	}
	// The slots' own tmpfs mounts are the device plugin's; anything else mounted is left over.
	for _, m := range testutil.MountsUnder(n.t, n.stateDir) {
		if filepath.Dir(m) != filepath.Join(n.stateDir, "sockets") || testutil.MountSource(n.t, m) != "memifnet-slot" {
			left = append(left, "mount "+m)
		}
	}
	if len(left) > 0 {
		n.t.Fatalf("left behind: %v", left)
	}
}
