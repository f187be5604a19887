package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// K3s are the paths manifests/components/cni-paths/k3s sets: the cluster runs with what memifnet
// ships for k3s, not a look-alike.
func TestK3sPathsAreTheComponents(t *testing.T) {
	b, err := os.ReadFile("../../../manifests/components/cni-paths/k3s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"hostPath: {path: " + K3s.CNIBinDir + "}", "hostPath: {path: " + K3s.CNIConfDir + "}",
		`"kubeconfig": "` + K3s.KubeletKubeconfig + `"`} {
		if !strings.Contains(string(b), p) {
			t.Errorf("components/cni-paths/k3s does not set %s", p)
		}
	}
}

// Every place a node's runtime and kubelet are configured takes the cluster's paths: containerd's
// CNI dirs, the files the harness writes, the paths a node after the first mounts its own over.
func TestPathsConfigureTheNode(t *testing.T) {
	cfg := containerdConfig("/run/b/containerd", "pause:1", K3s)
	for _, want := range []string{"bin_dirs = [\"" + K3s.CNIBinDir + "\"]", "conf_dir = \"" + K3s.CNIConfDir + "\""} {
		if !strings.Contains(cfg, want) {
			t.Errorf("containerd's config lacks %s:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, `"`+Kubeadm.CNIBinDir+`"`) || strings.Contains(cfg, `"`+Kubeadm.CNIConfDir+`"`) {
		t.Errorf("containerd's config names kubeadm's CNI dirs:\n%s", cfg)
	}
	if got := K3s.Conflist(); got != K3s.CNIConfDir+"/10-memifnet-cluster.conflist" {
		t.Errorf("conflist %s", got)
	}
	if got := K3s.MultusConf(); got != K3s.CNIConfDir+"/00-multus.conf" {
		t.Errorf("multus conf %s", got)
	}
	c := New("/repo", "/run/b", Inputs{}, nil)
	if c.Paths != Kubeadm {
		t.Errorf("New: paths %+v, want kubeadm's", c.Paths)
	}
	c.Paths = K3s
	np := c.NodePaths()
	for _, d := range []string{K3s.CNIConfDir, K3s.CNIBinDir, "/var/lib/rancher/k3s/agent"} {
		if !slices.Contains(np, d) {
			t.Errorf("node paths %q lack %s", np, d)
		}
	}
	for _, d := range Kubeadm.Dirs() {
		if slices.Contains(np, d) {
			t.Errorf("node paths %q have kubeadm's %s", np, d)
		}
	}
	if s := c.holderScript(Layout(2)[1]); !strings.Contains(s, `mount --bind "/run/b/nodes/2/root`+K3s.CNIBinDir+`" "`+K3s.CNIBinDir+`"`) {
		t.Errorf("node 2 does not bind its own %s:\n%s", K3s.CNIBinDir, s)
	}
}

// makeDirs records the topmost directory it creates for each (Down removes it and all below),
// nothing that was there, and a second call records nothing; undone, nothing it made is left.
func TestMakeDirsRecordsTopmost(t *testing.T) {
	root := t.TempDir()
	c := New("/repo", t.TempDir(), Inputs{}, nil)
	deep := filepath.Join(root, "var/lib/rancher/k3s/agent/etc/cni/net.d")
	bin := filepath.Join(root, "var/lib/rancher/k3s/data/cni")
	if err := os.MkdirAll(filepath.Join(root, "var/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.makeDirs(deep, bin); err != nil {
		t.Fatal(err)
	}
	want := []Change{{Kind: "path", Path: filepath.Join(root, "var/lib/rancher")},
		{Kind: "path", Path: filepath.Join(root, "var/lib/rancher/k3s/data")}}
	if !slices.EqualFunc(c.state.Changes, want, func(a, b Change) bool { return a.Kind == b.Kind && a.Path == b.Path }) {
		t.Errorf("recorded %+v, want %+v", c.state.Changes, want)
	}
	for _, d := range []string{deep, bin} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("%s not made: %v", d, err)
		}
	}
	if err := c.makeDirs(deep); err != nil || len(c.state.Changes) != 2 {
		t.Errorf("again: %v, changes %+v", err, c.state.Changes)
	}
	for _, ch := range slices.Backward(c.state.Changes) {
		if err := ch.undo(); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "var/lib")); len(ents) != 0 {
		t.Errorf("undo left %v under var/lib", ents)
	}
}

// A snapshot of a k3s cluster looks at k3s's directories, every directory above them, and
// kubeadm's (which such a cluster must leave alone); a leak under either counts.
func TestSnapshotPaths(t *testing.T) {
	anc := K3s.ancestors()
	for _, d := range []string{"/var", "/var/lib", "/var/lib/rancher", "/var/lib/rancher/k3s/agent", K3s.CNIConfDir, K3s.CNIBinDir} {
		if !slices.Contains(anc, d) {
			t.Errorf("ancestors %q lack %s", anc, d)
		}
	}
	if slices.Contains(anc, "/") || len(anc) != len(slices.Compact(slices.Sorted(slices.Values(anc)))) {
		t.Errorf("ancestors %q: root or duplicates", anc)
	}
	before := Snapshot{Distro: K3s}
	for _, leaked := range []string{"/etc/cni", "/var/lib/rancher", K3s.CNIBinDir + "/memif-cni"} {
		after := Snapshot{Distro: K3s, Paths: []string{leaked}}
		if l := before.Leaks(after, "/run/base"); !slices.Equal(l, []string{"+path " + leaked}) {
			t.Errorf("%s left: leaks %q", leaked, l)
		}
	}
	after := Snapshot{Distro: K3s, Mounts: []string{K3s.CNIConfDir + "/x private"}}
	if l := before.Leaks(after, "/run/base"); len(l) != 1 {
		t.Errorf("a mount under the k3s conf dir: leaks %q", l)
	}
}
