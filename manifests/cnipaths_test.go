package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// cniPaths are the node's CNI directories each components/cni-paths/<distribution> sets.
var cniPaths = map[string]struct{ bin, conf string }{
	"kubeadm":   {"/opt/cni/bin", "/etc/cni/net.d"},
	"rke2":      {"/opt/cni/bin", "/etc/cni/net.d"},
	"k3s":       {"/var/lib/rancher/k3s/data/cni", "/var/lib/rancher/k3s/agent/etc/cni/net.d"},
	"openshift": {"/var/lib/cni/bin", "/etc/kubernetes/cni/net.d"},
}

// buildWith renders overlay with component, as a user's kustomization listing both does.
func buildWith(t *testing.T, overlay, component string) []any {
	t.Helper()
	dir := t.TempDir()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	// kustomize takes no absolute roots: reach the manifests from the temp dir relatively.
	rel, err := filepath.Rel(dir, here)
	if err != nil {
		t.Fatal(err)
	}
	k := "resources: [" + filepath.Join(rel, overlay) + "]\ncomponents: [" + filepath.Join(rel, "components/cni-paths", component) + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return build(t, dir)
}

// TestCNIPathsComponents renders every overlay with every distribution's component: the node's
// CNI bin and conf dirs are the distribution's, no other distribution's default is left, and every
// container's flag names the mount of that volume (so memif-cni-install and memif-deviceplugin
// write where the kubelet looks). The conf dir is mounted only where the installer chains.
func TestCNIPathsComponents(t *testing.T) {
	for _, overlay := range []string{"overlays/chained", "overlays/multus", "overlays/dra", "overlays/cert-manager"} {
		chained := overlay != "overlays/multus"
		for dist, want := range cniPaths {
			t.Run(overlay+"+"+dist, func(t *testing.T) {
				spec := daemonSet(t, buildWith(t, overlay, dist)).Spec.Template.Spec
				hostPaths := map[string]string{}
				for _, v := range spec.Volumes {
					if v.HostPath != nil {
						hostPaths[v.Name] = v.HostPath.Path
					}
				}
				if hostPaths["cni-bin"] != want.bin {
					t.Errorf("volume cni-bin at %q, want %s", hostPaths["cni-bin"], want.bin)
				}
				if conf, ok := hostPaths["cni-conf"]; ok != chained || (chained && conf != want.conf) {
					t.Errorf("volume cni-conf at %q (present %v), want %s only when chained", conf, ok, want.conf)
				}
				for other, p := range cniPaths {
					for name, hp := range hostPaths {
						if other != dist && (hp == p.bin || hp == p.conf) && hp != want.bin && hp != want.conf {
							t.Errorf("volume %s at %s, %s's path", name, hp, other)
						}
					}
				}
				checkCNIFlags(t, spec, chained)
			})
		}
	}
}

// checkCNIFlags: every --cni-bin-dir and --cni-conf-dir is the mount path of the volume of that
// directory, in the container that has the flag; the installer has both when chained.
func checkCNIFlags(t *testing.T, spec corev1.PodSpec, chained bool) {
	t.Helper()
	flags := map[string]string{"cni-bin-dir": "cni-bin", "cni-conf-dir": "cni-conf"}
	seen := map[string]int{}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for flag, volume := range flags {
			v, ok := flagValue(c.Args, flag)
			if !ok {
				continue
			}
			seen[c.Name+" --"+flag]++
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume && m.MountPath == v }) {
				t.Errorf("%s --%s=%s is not where volume %s is mounted (%+v)", c.Name, flag, v, volume, c.VolumeMounts)
			}
		}
	}
	want := map[string]int{"install-cni --cni-bin-dir": 1, "deviceplugin --cni-bin-dir": 1}
	if chained {
		want["install-cni --cni-conf-dir"] = 1
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("CNI dir flags %v, want %v", seen, want)
	}
}

// The kubeadm component is what every overlay renders without one (but for the order of the
// DaemonSet's volumes, which a strategic merge patch changes, and the NAD config's spacing).
func TestCNIPathsKubeadmIsDefault(t *testing.T) {
	for _, overlay := range []string{"overlays/chained", "overlays/multus", "overlays/dra"} {
		if !reflect.DeepEqual(normalize(buildWith(t, overlay, "kubeadm")), normalize(build(t, overlay))) {
			t.Errorf("%s with components/cni-paths/kubeadm differs from %s alone", overlay, overlay)
		}
	}
}

func normalize(objs []any) []any {
	for _, o := range objs {
		if n, ok := o.(*nadObject); ok {
			var v any
			if err := json.Unmarshal([]byte(n.Spec.Config), &v); err == nil {
				b, _ := json.Marshal(v)
				n.Spec.Config = string(b)
			}
		}
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			slices.SortFunc(ds.Spec.Template.Spec.Volumes, func(a, b corev1.Volume) int { return strings.Compare(a.Name, b.Name) })
		}
	}
	return objs
}

// kubeconfigs are the kubelet's kubeconfig of each distribution, which the component puts in the
// Multus overlay's NetworkAttachmentDefinition.
var kubeconfigs = map[string]string{
	"kubeadm":   "/etc/kubernetes/kubelet.conf",
	"rke2":      "/var/lib/rancher/rke2/agent/kubelet.kubeconfig",
	"k3s":       "/var/lib/rancher/k3s/agent/kubelet.kubeconfig",
	"openshift": "/var/lib/kubelet/kubeconfig",
}

// nadConfig returns the memif-cni entry of the build's NetworkAttachmentDefinition and the rest
// of its config.
func nadConfig(t *testing.T, objs []any) (kubeconfig string, rest map[string]any) {
	t.Helper()
	for _, o := range objs {
		if n, ok := o.(*nadObject); ok {
			if err := json.Unmarshal([]byte(n.Spec.Config), &rest); err != nil {
				t.Fatalf("NAD config: %v", err)
			}
			plugins, _ := rest["plugins"].([]any)
			if len(plugins) != 1 {
				t.Fatalf("NAD plugins: %v", rest["plugins"])
			}
			p, _ := plugins[0].(map[string]any)
			kubeconfig, _ = p["kubeconfig"].(string)
			delete(p, "kubeconfig")
			return kubeconfig, rest
		}
	}
	t.Fatal("no NetworkAttachmentDefinition")
	return "", nil
}

// TestCNIPathsKubeconfig: under Multus each component names its distribution's kubelet
// kubeconfig in the NAD, whose config is otherwise the overlay's (the component restates it).
func TestCNIPathsKubeconfig(t *testing.T) {
	if len(kubeconfigs) != len(cniPaths) {
		t.Fatalf("components %v, kubeconfigs %v", cniPaths, kubeconfigs)
	}
	_, want := nadConfig(t, build(t, "overlays/multus"))
	for dist, kc := range kubeconfigs {
		objs := buildWith(t, "overlays/multus", dist)
		got, rest := nadConfig(t, objs)
		if got != kc {
			t.Errorf("%s: NAD kubeconfig %q, want %s", dist, got, kc)
		}
		if !reflect.DeepEqual(rest, want) {
			t.Errorf("%s: NAD config %v drifted from the overlay's %v", dist, rest, want)
		}
		checkNAD(t, objs, kc)
	}
}
