package cluster

import (
	"errors"
	"os"
	"path/filepath"
)

// Paths are the node paths distributions put in different places: the container runtime's CNI
// conf and bin dirs and the kubelet's kubeconfig (memif-cni reads pods with it under Multus).
// memifnet ships a setting for each in manifests/components/cni-paths/<distribution> and the
// chart's cni.preset; a cluster runs with one set (Cluster.Paths) on every node.
type Paths struct {
	CNIConfDir        string `json:"cniConfDir"`
	CNIBinDir         string `json:"cniBinDir"`
	KubeletKubeconfig string `json:"kubeletKubeconfig"`
}

// Kubeadm are kubeadm's (and kind's) paths, the default: manifests/components/cni-paths/kubeadm,
// the same as the overlays' own.
var Kubeadm = Paths{
	CNIConfDir:        "/etc/cni/net.d",
	CNIBinDir:         "/opt/cni/bin",
	KubeletKubeconfig: "/etc/kubernetes/kubelet.conf",
}

// K3s are k3s's paths with its default data dir, as manifests/components/cni-paths/k3s and the
// chart's cni.preset=k3s set them.
var K3s = Paths{
	CNIConfDir:        "/var/lib/rancher/k3s/agent/etc/cni/net.d",
	CNIBinDir:         "/var/lib/rancher/k3s/data/cni",
	KubeletKubeconfig: "/var/lib/rancher/k3s/agent/kubelet.kubeconfig",
}

// Presets are the paths a cluster can run with, by the name of the cni-paths component (and the
// chart's cni.preset) that sets them: `make cluster-up CNI_PATHS=k3s`.
var Presets = map[string]Paths{"kubeadm": Kubeadm, "k3s": K3s}

// orDefault is p, or Kubeadm for the zero Paths (a state file written before clusters had paths).
func (p Paths) orDefault() Paths {
	if p == (Paths{}) {
		return Kubeadm
	}
	return p
}

// Conflist is the node's primary network: bridge with host-local IPAM. memif-cni-install
// --chain (the chained overlay) appends memif-cni to it.
func (p Paths) Conflist() string { return filepath.Join(p.CNIConfDir, "10-memifnet-cluster.conflist") }

// MultusConf is the Multus thin plugin's configuration: the first file of the CNI conf dir, so
// the runtime runs Multus for every pod, with the cluster's primary network as its default
// delegate.
func (p Paths) MultusConf() string { return filepath.Join(p.CNIConfDir, "00-multus.conf") }

func (p Paths) multusKubeconfigDir() string { return filepath.Join(p.CNIConfDir, "multus.d") }

// Dirs are the directories of the paths: the CNI conf and bin dirs and the kubeconfig's.
func (p Paths) Dirs() []string {
	return []string{p.CNIConfDir, p.CNIBinDir, filepath.Dir(p.KubeletKubeconfig)}
}

// ancestors are the directories above the paths' Dirs and the Dirs themselves, root excluded
// (/var, /var/lib, /var/lib/rancher, ...): what a cluster may create to make them.
func (p Paths) ancestors() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range p.Dirs() {
		for ; d != "/" && d != "." && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// topMissing is the topmost directory of dir and its ancestors that does not exist ("" when dir
// exists): what removing undoes making dir.
func topMissing(dir string) (string, error) {
	top := ""
	for d := filepath.Clean(dir); d != "/" && d != "."; d = filepath.Dir(d) {
		_, err := os.Lstat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		top = d
	}
	return top, nil
}

// makeDirs makes dirs (0755), recording first the topmost directory of each that it creates, so
// that Down removes all it made and nothing else.
func (c *Cluster) makeDirs(dirs ...string) error {
	for _, d := range dirs {
		top, err := topMissing(d)
		if err != nil {
			return err
		}
		if top != "" {
			if err := c.record(Change{Kind: "path", Path: top}); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}
