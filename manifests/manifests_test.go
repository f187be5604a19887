// Package manifests holds the kustomize manifests; this test builds every kustomization with the
// kustomize Go API, decodes every object strictly with the real Kubernetes API types (unknown or
// duplicate fields fail) and checks them against the design: image, hostPaths, resource names,
// annotation keys, hardening.
package manifests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
)

// What the manifests must say: the shared names from internal/names (docs/design.md), the rest
// from docs/install.md and docs/deviceplugin.md.
const (
	image          = "ghcr.io/memifnet/memifnet"
	imageTag       = "v0.1.0"
	namespace      = "memifnet-system"
	socketResource = names.SocketResource
	portsKey       = names.PortsAnnotation
	stateDir       = names.StateDir
	kubeletDir     = names.KubeletDir
	devinfoDP      = "/var/run/k8s.cni.cncf.io/devinfo/dp"  // cmd/internal/devinfo.DefaultDir
	devinfoCNI     = "/var/run/k8s.cni.cncf.io/devinfo/cni" // memif-cni's: the sibling of dp (devinfo.CNIPath)
	httpPort       = 9102
)

var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// nad mirrors k8s.cni.cncf.io/v1 NetworkAttachmentDefinition (its client module is not
// available here); decoded strictly like the rest.
type nad struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metaOnly `json:"metadata"`
	Spec       struct {
		Config string `json:"config"`
	} `json:"spec"`
}

type metaOnly struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// build runs kustomize on dir and decodes every object strictly.
func build(t *testing.T, dir string) []any {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []any
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, decode(t, dir+": "+r.GetKind()+"/"+r.GetName(), y))
	}
	return objs
}

// decode decodes one object strictly; a NetworkAttachmentDefinition becomes *nadObject.
func decode(t *testing.T, what string, y []byte) any {
	t.Helper()
	obj, err := decodeStrict(y)
	if err != nil {
		t.Fatalf("%s: strict decode: %v\n%s", what, err, y)
	}
	return obj
}

func decodeStrict(y []byte) (any, error) {
	var tm struct{ Kind string }
	if err := yaml.Unmarshal(y, &tm); err != nil {
		return nil, err
	}
	if tm.Kind == "NetworkAttachmentDefinition" {
		var n nad
		if err := yaml.UnmarshalStrict(y, &n); err != nil {
			return nil, err
		}
		return &nadObject{n}, nil
	}
	if obj, ok, err := decodeCertManager(y, tm.Kind); ok {
		return obj, err
	}
	obj, _, err := strict.Decode(y, nil, nil)
	return obj, err
}

// The strict decoding is live: a misspelt or misplaced field fails.
func TestStrictDecodingRejectsTypos(t *testing.T) {
	for _, y := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: c, image: i, imagePullPolicey: Never}]\n",
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      hostNetwork: true\n      hostNetwork: false\n",
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: x}\nspec: {conifg: \"{}\"}\n",
		"apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: x}\nspec: {secretName: s, dnsName: [a]}\n",
		"apiVersion: cert-manager.io/v1\nkind: Issuer\nmetadata: {name: x}\nspec: {ca: {secret: s}}\n",
	} {
		if _, err := decodeStrict([]byte(y)); err == nil {
			t.Errorf("accepted:\n%s", y)
		}
	}
}

type nadObject struct{ nad }

var overlays = []string{"base", "overlays/chained", "overlays/multus", "overlays/dra", "overlays/cert-manager", "."}

func daemonSet(t *testing.T, objs []any) *appsv1.DaemonSet {
	t.Helper()
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			return ds
		}
	}
	t.Fatal("no DaemonSet")
	return nil
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "", true
		}
	}
	return "", false
}

// Every YAML file, including patches, decodes strictly on its own too: a typo in a patch would
// otherwise surface only as a silently ignored field.
func TestEveryFileDecodesStrictly(t *testing.T) {
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") || filepath.Base(p) == "kustomization.yaml" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, doc := range strings.Split(string(b), "\n---\n") {
			if strings.TrimSpace(doc) != "" {
				decode(t, fmt.Sprintf("%s#%d", p, i), []byte(doc))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOverlaysBuild(t *testing.T) {
	for _, dir := range append(overlays, "examples", "dashboards") {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
			for _, o := range objs {
				checkPodSpecs(t, o)
			}
		})
	}
	// `kubectl apply -k manifests/` is the chained overlay.
	root, chained := build(t, "."), build(t, "overlays/chained")
	if !reflect.DeepEqual(root, chained) {
		t.Error("manifests/ does not build to the chained overlay")
	}
}

// The node agent: namespace, image, hostPaths, flags and their mounts, probes, hugepages.
func TestNodeAgent(t *testing.T) {
	wantHostPaths := map[string][]string{
		"base":                  {"/opt/cni/bin", "/var/lib", devinfoCNI, kubeletDir + "/device-plugins", kubeletDir + "/pod-resources", stateDir, devinfoDP},
		"overlays/chained":      {"/opt/cni/bin", "/var/lib", devinfoCNI, kubeletDir + "/device-plugins", kubeletDir + "/pod-resources", stateDir, devinfoDP, "/etc/cni/net.d"},
		"overlays/cert-manager": {"/opt/cni/bin", "/var/lib", devinfoCNI, kubeletDir + "/device-plugins", kubeletDir + "/pod-resources", stateDir, devinfoDP, "/etc/cni/net.d"},
		"overlays/multus":       {"/opt/cni/bin", "/var/lib", devinfoCNI, kubeletDir + "/device-plugins", kubeletDir + "/pod-resources", stateDir, devinfoDP},
		"overlays/dra": {"/opt/cni/bin", "/var/lib", devinfoCNI, kubeletDir + "/device-plugins", kubeletDir + "/pod-resources", stateDir, devinfoDP, "/etc/cni/net.d",
			kubeletDir + "/plugins", kubeletDir + "/plugins_registry", "/var/run/cdi"},
	}
	for dir, want := range wantHostPaths {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			for _, o := range objs {
				if m, ok := o.(interface{ GetNamespace() string }); ok {
					if _, isNS := o.(*corev1.Namespace); isNS {
						continue
					}
					if _, cluster := o.(*rbacv1.ClusterRole); cluster {
						continue
					}
					if _, cluster := o.(*rbacv1.ClusterRoleBinding); cluster {
						continue
					}
					if _, cluster := o.(*admissionregv1.MutatingWebhookConfiguration); cluster {
						continue
					}
					if _, cluster := o.(*admissionregv1.ValidatingWebhookConfiguration); cluster {
						continue
					}
					if _, cluster := o.(*resourcev1.DeviceClass); cluster {
						continue
					}
					if _, cluster := o.(*admissionregv1.ValidatingAdmissionPolicy); cluster {
						continue
					}
					if _, cluster := o.(*admissionregv1.ValidatingAdmissionPolicyBinding); cluster {
						continue
					}
					if r, ok := o.(*rbacv1.Role); ok && dir == "overlays/dra" && r.Name == "memifnet-dra-events" && r.Namespace == "default" {
						continue // the DRA driver's Events on its Node, where the kubelet's are
					}
					if r, ok := o.(*rbacv1.RoleBinding); ok && dir == "overlays/dra" && r.Name == "memifnet-dra-events" && r.Namespace == "default" {
						continue
					}
					if ns := m.GetNamespace(); ns != namespace {
						t.Errorf("%T in namespace %q, want %s", o, ns, namespace)
					}
				}
			}
			ds := daemonSet(t, objs)
			spec := ds.Spec.Template.Spec
			hostPaths := map[string]string{} // volume -> path
			var got []string
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					hostPaths[v.Name] = v.HostPath.Path
					got = append(got, v.HostPath.Path)
				}
			}
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("hostPaths %q, want exactly %q", got, want)
			}
			// Every hostPath is mounted where the flags say; the state dir with Bidirectional
			// propagation (hugetlbfs mounts must reach the host).
			dp := container(t, spec.Containers, "deviceplugin")
			mounts := map[string]corev1.VolumeMount{}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				for _, m := range c.VolumeMounts {
					mounts[c.Name+":"+m.MountPath] = m
				}
			}
			for flag, path := range map[string]string{"kubelet-dir": kubeletDir, "state-dir": stateDir, "devinfo-dir": devinfoDP} {
				if v, _ := flagValue(dp.Args, flag); v != path {
					t.Errorf("deviceplugin --%s=%q, want %s", flag, v, path)
				}
			}
			for _, p := range []string{kubeletDir + "/device-plugins", kubeletDir + "/pod-resources", stateDir, devinfoDP} {
				m, ok := mounts["deviceplugin:"+p]
				if !ok || hostPaths[m.Name] != p {
					t.Errorf("deviceplugin: %s is not the host's %s (mount %+v)", p, p, m)
				}
			}
			if m := mounts["deviceplugin:"+stateDir]; m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
				t.Errorf("state dir mount propagation %v, want Bidirectional", m.MountPropagation)
			}
			// The state dir's parent, through which an uninstall removes it: the host's, and
			// HostToContainer, so that no copy of a pod's volume, slot or pool mount made at the
			// agent's start outlives the host's unmount of it in the agent's container.
			v, _ := flagValue(dp.Args, "state-dir-parent")
			if m := mounts["deviceplugin:"+v]; hostPaths[m.Name] != filepath.Dir(stateDir) ||
				m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
				t.Errorf("deviceplugin --state-dir-parent=%q: mount %+v, want the host's %s with HostToContainer propagation", v, m, filepath.Dir(stateDir))
			}
			if m := mounts["deviceplugin:"+devinfoCNI]; hostPaths[m.Name] != devinfoCNI {
				t.Errorf("deviceplugin: %s (memif-cni's device-info, removed at an uninstall) is not the host's (mount %+v)", devinfoCNI, m)
			}
			inst := container(t, spec.InitContainers, "install-cni")
			if v, _ := flagValue(inst.Args, "cni-bin-dir"); hostPaths[mounts["install-cni:"+v].Name] != "/opt/cni/bin" {
				t.Errorf("install-cni --cni-bin-dir=%s is not the host's /opt/cni/bin", v)
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				if c.Image != image+":"+imageTag {
					t.Errorf("container %s image %q, want %s:%s", c.Name, c.Image, image, imageTag)
				}
				if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
					t.Errorf("container %s: memory requests and limits must be set", c.Name)
				}
			}
			// Probes on the plugin's health endpoints, at the port of --http-address, which is
			// HTTPS; /metrics there is authorized; the plain one is on the loopback only.
			if v, _ := flagValue(dp.Args, "http-address"); v != fmt.Sprintf(":%d", httpPort) {
				t.Errorf("--http-address=%s", v)
			}
			if v, _ := flagValue(dp.Args, "metrics-auth"); v != "true" {
				t.Errorf("--metrics-auth=%s, want true", v)
			}
			if v, _ := flagValue(dp.Args, "local-metrics-address"); v != "127.0.0.1:9101" {
				t.Errorf("--local-metrics-address=%s, want 127.0.0.1:9101", v)
			}
			if p := dp.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.IntValue() != httpPort || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("liveness probe %+v", p)
			}
			if p := dp.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.IntValue() != httpPort || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("readiness probe %+v", p)
			}
			// The DaemonSet requests exactly the hugepages its pools pre-fault (one NUMA node).
			want := poolBytes(t, objs)
			for size, bytes := range want {
				rn := corev1.ResourceName("hugepages-" + size)
				req, lim := dp.Resources.Requests[rn], dp.Resources.Limits[rn]
				if req.Value() != bytes || lim.Value() != bytes {
					t.Errorf("hugepages-%s request %s limit %s, want %d bytes", size, req.String(), lim.String(), bytes)
				}
			}
			switch dir {
			case "overlays/chained", "overlays/cert-manager":
				if inst.RestartPolicy == nil || *inst.RestartPolicy != corev1.ContainerRestartPolicyAlways {
					t.Error("chained: install-cni must be a sidecar (restartPolicy Always) to uninstall on deletion")
				}
				_, chain := flagValue(inst.Args, "chain")
				_, wait := flagValue(inst.Args, "wait")
				v, _ := flagValue(inst.Args, "cni-conf-dir")
				if !chain || !wait || hostPaths[mounts["install-cni:"+v].Name] != "/etc/cni/net.d" {
					t.Errorf("chained: install-cni args %q", inst.Args)
				}
			case "overlays/multus":
				// No token on the node (issue 18 part 7): memif-cni reads pods with the kubelet's
				// own credentials, whose Node authorizer scope is the node's pods.
				if v, set := flagValue(inst.Args, "kubeconfig"); set {
					t.Errorf("multus: install-cni writes a kubeconfig from the service account (%s); memif-cni uses the kubelet's", v)
				}
				// The agent's token (it reads its own DaemonSet, to tell an uninstall) never
				// reaches the installer, which writes what memif-cni runs with.
				for _, v := range spec.Volumes {
					if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(p corev1.VolumeProjection) bool { return p.ServiceAccountToken != nil }) && mounted(inst, v.Name) {
						t.Errorf("multus: volume %s projects the service account token into install-cni", v.Name)
					}
				}
				if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
					t.Error("multus: no container gets the service account token")
				}
				checkNAD(t, objs, "/etc/kubernetes/kubelet.conf")
			}
		})
	}
}

// poolBytes reads the device plugin's ConfigMap: page size -> bytes the pools fault per node.
func poolBytes(t *testing.T, objs []any) map[string]int64 {
	t.Helper()
	for _, o := range objs {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Name != "memifnet-deviceplugin" {
			continue
		}
		cfg := deviceConfig(t, cm)
		out := map[string]int64{}
		for _, p := range cfg.Pools {
			u := resource.MustParse(p.UnitSize)
			out[p.PageSize] += u.Value() * p.UnitsPerNUMANode
			if p.Name != "hugepool" {
				t.Errorf("pool %q: the examples ask for memifnet.io/hugepool", p.Name)
			}
		}
		if cfg.DRA.Enabled { // the DRA driver's own pools are faulted by the same container
			for _, p := range cfg.DRA.Pools {
				u := resource.MustParse(p.UnitSize)
				out[p.PageSize] += u.Value() * p.UnitsPerNUMANode
			}
		}
		return out
	}
	t.Fatal("no ConfigMap memifnet-deviceplugin")
	return nil
}

type poolConfig struct {
	Name             string `json:"name"`
	PageSize         string `json:"pageSize"`
	UnitSize         string `json:"unitSize"`
	UnitsPerNUMANode int64  `json:"unitsPerNUMANode"`
}

type dpConfig struct {
	SocketSlots int          `json:"socketSlots"`
	Pools       []poolConfig `json:"pools"`
	DRA         struct {
		Enabled     bool         `json:"enabled"`
		DriverName  string       `json:"driverName"`
		SocketSlots int          `json:"socketSlots"`
		Pools       []poolConfig `json:"pools"`
	} `json:"dra"`
}

// deviceConfig decodes the device plugin's config strictly (docs/deviceplugin.md, docs/dra.md).
func deviceConfig(t *testing.T, cm *corev1.ConfigMap) dpConfig {
	t.Helper()
	var cfg dpConfig
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("device plugin config: %v", err)
	}
	return cfg
}

var cniKeys = []string{"type", "capabilities", "stateDir", "kubeletDir", "deviceInfoDir", "insecureKubeletPodsAPI", "kubeletURL", "kubeconfig", "timeoutSeconds", "ipam"}

func checkNAD(t *testing.T, objs []any, kubeconfig string) {
	t.Helper()
	for _, o := range objs {
		n, ok := o.(*nadObject)
		if !ok {
			continue
		}
		if n.APIVersion != "k8s.cni.cncf.io/v1" || n.Metadata.Annotations["k8s.v1.cni.cncf.io/resourceName"] != socketResource {
			t.Errorf("NAD %s: apiVersion %s, resourceName %q", n.Metadata.Name, n.APIVersion, n.Metadata.Annotations["k8s.v1.cni.cncf.io/resourceName"])
		}
		list, err := libcni.ConfListFromBytes([]byte(n.Spec.Config))
		if err != nil {
			t.Fatalf("NAD config: %v", err)
		}
		if len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "memif-cni" {
			t.Fatalf("NAD plugins: %+v", list.Plugins)
		}
		var keys map[string]json.RawMessage
		json.Unmarshal(list.Plugins[0].Bytes, &keys)
		for k := range keys {
			if !slices.Contains(cniKeys, k) {
				t.Errorf("NAD memif-cni key %q is not one memif-cni knows (docs/cni.md)", k)
			}
		}
		var kc string
		json.Unmarshal(keys["kubeconfig"], &kc)
		if kc != kubeconfig {
			t.Errorf("NAD kubeconfig %q, installer writes %q", kc, kubeconfig)
		}
		return
	}
	t.Error("no NetworkAttachmentDefinition")
}

// mounted says whether container c mounts volume name.
func mounted(c corev1.Container, name string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name })
}

// ownDaemonSetOnly is the one rule of the agent's Role memifnet-node: read its own DaemonSet,
// whose deletion tells an uninstall from a restart (docs/deviceplugin.md).
func ownDaemonSetOnly(t *testing.T, objs []any) {
	t.Helper()
	var agents []string // every agent DaemonSet: the default profile's and each profile's
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			agents = append(agents, ds.Name)
		}
	}
	sort.Strings(agents)
	for _, o := range objs {
		if r, ok := o.(*rbacv1.Role); ok && r.Name == "memifnet-node" {
			want := []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: agents, Verbs: []string{"get", "list", "watch"}}}
			if !reflect.DeepEqual(r.Rules, want) {
				t.Errorf("Role memifnet-node rules %+v, want %+v", r.Rules, want)
			}
			return
		}
	}
	t.Error("no Role memifnet-node")
}

// The node agent's service account holds nothing outside the DRA overlay but the reading of its
// own DaemonSet (issue 18 part 7: the Multus overlay's cluster-wide get pods is gone) and, since
// issue 32 item 6, system:auth-delegator (create tokenreviews and subjectaccessreviews, nothing
// else: the review of /metrics callers' tokens); the e2e tier 3 checks can-i on the cluster. The
// ClusterRole for /metrics readers allows get /metrics only and is bound to no one by memifnet.
func TestNodeAgentHoldsNoRBAC(t *testing.T) {
	for _, dir := range overlays {
		objs := build(t, dir)
		ownDaemonSetOnly(t, objs)
		delegators := 0
		for _, o := range objs {
			var subjects []rbacv1.Subject
			var name string
			switch b := o.(type) {
			case *rbacv1.ClusterRoleBinding:
				subjects, name = b.Subjects, b.Name
				if name == "memifnet-node-auth-delegator" {
					delegators++
					if b.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"}) ||
						len(b.Subjects) != 1 || b.Subjects[0] != (rbacv1.Subject{Kind: "ServiceAccount", Name: "memifnet", Namespace: "memifnet-system"}) {
						t.Errorf("%s: ClusterRoleBinding %s: %+v %+v, want system:auth-delegator for memifnet-system/memifnet only", dir, name, b.RoleRef, b.Subjects)
					}
					continue
				}
				if b.RoleRef.Name == "memifnet-metrics-reader" {
					t.Errorf("%s: %s binds memifnet-metrics-reader: that is for the cluster's scraper, not memifnet's", dir, name)
				}
			case *rbacv1.RoleBinding:
				subjects, name = b.Subjects, b.Name
			case *rbacv1.ClusterRole:
				if b.Name == "memifnet-metrics-reader" {
					want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
					if !reflect.DeepEqual(b.Rules, want) {
						t.Errorf("%s: ClusterRole memifnet-metrics-reader rules %+v, want %+v", dir, b.Rules, want)
					}
				}
			}
			for _, s := range subjects {
				if s.Kind == "ServiceAccount" && s.Name == "memifnet" && name != "memifnet-node" && (dir != "overlays/dra" || (name != "memifnet-dra" && name != "memifnet-dra-events")) {
					t.Errorf("%s: %T %s binds the node agent's service account", dir, o, name)
				}
			}
		}
		if delegators != 1 {
			t.Errorf("%s: %d ClusterRoleBindings memifnet-node-auth-delegator, want 1 (--metrics-auth reviews tokens)", dir, delegators)
		}
		find(t, objs, "memifnet-metrics-reader", func(r *rbacv1.ClusterRole) string { return r.Name })
	}
}

// The examples ask for the resources the design names, carry a valid memifnet.io/ports
// annotation with no more ports than socket units, and run hardened.
func TestExamples(t *testing.T) {
	objs := build(t, "examples")
	multus, err := os.ReadFile("examples/multus-pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var multusPods []any
	for i, doc := range strings.Split(string(multus), "\n---\n") {
		multusPods = append(multusPods, decode(t, fmt.Sprintf("examples/multus-pod.yaml #%d", i+1), []byte(doc)))
	}
	// Each set of examples runs on a 2-core node next to the node agent (the e2e tier 3 runs them
	// so): their CPU requests must fit.
	agent := cpuRequests(build(t, "."))
	for name, set := range map[string][]any{"manifests/examples": objs, "examples/multus-pod.yaml": multusPods} {
		if sum := agent + cpuRequests(set); sum > 2000 {
			t.Errorf("%s: CPU requests %dm with the node agent's: more than a 2-core node", name, sum)
		}
	}
	objs = append(objs, multusPods...)
	links := map[string]int{}
	for _, o := range objs {
		pod, ok := o.(*corev1.Pod)
		if !ok {
			t.Errorf("example %T: only pods expected", o)
			continue
		}
		for k := range pod.Annotations {
			if strings.HasPrefix(k, "memifnet.io/") && k != portsKey {
				t.Errorf("pod %s: unknown annotation %s", pod.Name, k)
			}
		}
		ports := parsePorts(t, pod.Name, pod.Annotations[portsKey])
		var sockets int64
		for _, c := range pod.Spec.Containers {
			q := c.Resources.Limits[socketResource]
			sockets += q.Value()
			for rn := range c.Resources.Limits {
				if strings.HasPrefix(string(rn), "memifnet.io/") && rn != socketResource && rn != "memifnet.io/hugepool" {
					t.Errorf("pod %s: resource %s is not one the device plugin offers", pod.Name, rn)
				}
			}
			if c.Image != image+":"+imageTag {
				t.Errorf("pod %s: image %s", pod.Name, c.Image)
			}
			if v, _ := flagValue(c.Args, "port"); !slices.ContainsFunc(ports, func(p map[string]any) bool { return p["name"] == v }) {
				t.Errorf("pod %s: memif-perf --port=%s is not a port of the annotation", pod.Name, v)
			}
		}
		if int64(len(ports)) > sockets {
			t.Errorf("pod %s: %d ports but %d memifnet.io/socket", pod.Name, len(ports), sockets)
		}
		for _, p := range ports {
			if l, ok := p["link"].(string); ok && pod.Namespace == "" {
				links[l]++
			}
		}
		if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("pod %s: must run as non-root", pod.Name)
		}
	}
	for _, l := range []string{"demo-link", "multus-link"} {
		if links[l] != 2 {
			t.Errorf("%s has %d ends, want 2", l, links[l])
		}
	}
}

// cpuRequests sums the CPU requests (millicores) of the pods and pod templates among objs: the
// containers, and the init containers that keep running (sidecars).
func cpuRequests(objs []any) int64 {
	var sum int64
	add := func(spec corev1.PodSpec) {
		for _, c := range spec.Containers {
			sum += c.Resources.Requests.Cpu().MilliValue()
		}
		for _, c := range spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				sum += c.Resources.Requests.Cpu().MilliValue()
			}
		}
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Pod:
			add(o.Spec)
		case *appsv1.DaemonSet:
			add(o.Spec.Template.Spec)
		case *appsv1.Deployment:
			for range *o.Spec.Replicas {
				add(o.Spec.Template.Spec)
			}
		}
	}
	return sum
}

var portFields = []string{"name", "link", "peer", "role", "mode", "id", "queues", "ringSize", "bufferSize", "zeroCopy"}

func parsePorts(t *testing.T, pod, v string) []map[string]any {
	t.Helper()
	var ports []map[string]any
	if err := json.Unmarshal([]byte(v), &ports); err != nil {
		t.Fatalf("pod %s: %s is not a JSON list: %v", pod, portsKey, err)
	}
	for _, p := range ports {
		for k := range p {
			if !slices.Contains(portFields, k) {
				t.Errorf("pod %s: port field %q is not in the design", pod, k)
			}
		}
		_, link := p["link"]
		_, peer := p["peer"]
		if link == peer {
			t.Errorf("pod %s: port %v needs exactly one of link and peer", pod, p["name"])
		}
	}
	return ports
}

// checkPodSpecs applies the hardening rules to any pod template.
func checkPodSpecs(t *testing.T, o any) {
	var spec *corev1.PodSpec
	switch v := o.(type) {
	case *corev1.Pod:
		spec = &v.Spec
	case *appsv1.DaemonSet:
		spec = &v.Spec.Template.Spec
	case *appsv1.Deployment:
		spec = &v.Spec.Template.Spec
	default:
		return
	}
	if sc := spec.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%T: pod seccompProfile must be RuntimeDefault", o)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%T: automountServiceAccountToken must be false", o)
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem must be true", c.Name)
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			if c.Name != "deviceplugin" {
				t.Errorf("container %s: only the device plugin may be privileged", c.Name)
			}
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation must be false", c.Name)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("container %s: must drop ALL capabilities and add none", c.Name)
		}
	}
}

// The DRA overlay: the driver enabled with slots and a pool of its own, DeviceClasses selecting
// the driver's device types, RBAC for slices and claim status, the kubelet plugin directories
// and the CDI directory mounted where the driver writes, and the API token in the node agent
// only.
func TestDRAOverlay(t *testing.T) {
	objs := build(t, "overlays/dra")
	classes := map[string]string{}
	var rules []rbacv1.PolicyRule
	for _, o := range objs {
		switch o := o.(type) {
		case *resourcev1.DeviceClass:
			if len(o.Spec.Selectors) != 1 || o.Spec.Selectors[0].CEL == nil {
				t.Fatalf("DeviceClass %s: want one CEL selector", o.Name)
			}
			classes[o.Name] = o.Spec.Selectors[0].CEL.Expression
		case *rbacv1.ClusterRole:
			if o.Name == "memifnet-dra" {
				rules = o.Rules
			}
		case *corev1.ConfigMap:
			cfg := deviceConfig(t, o)
			if !cfg.DRA.Enabled || cfg.DRA.SocketSlots == 0 || len(cfg.DRA.Pools) == 0 {
				t.Errorf("dra config %+v: want the driver enabled with slots and a pool", cfg.DRA)
			}
			for _, p := range cfg.DRA.Pools {
				if slices.ContainsFunc(cfg.Pools, func(q poolConfig) bool { return q.Name == p.Name }) {
					t.Errorf("dra pool %q is also a device plugin pool", p.Name)
				}
			}
		}
	}
	for name, typ := range map[string]string{"socket.memifnet.io": "socket", "hugepool.memifnet.io": "hugepage"} {
		want := fmt.Sprintf(`device.driver == %q && device.attributes[%q].type == %q`, names.DRADriver, names.DRADriver, typ)
		if classes[name] != want {
			t.Errorf("DeviceClass %s selects %q, want %q", name, classes[name], want)
		}
	}
	allowed := func(res, verb string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, "resource.k8s.io") && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, verb)
		})
	}
	for _, rv := range [][2]string{{"resourceslices", "create"}, {"resourceslices", "watch"}, {"resourceclaims", "get"}, {"resourceclaims/status", "update"}} {
		if !allowed(rv[0], rv[1]) {
			t.Errorf("ClusterRole memifnet-dra does not allow %s %s", rv[1], rv[0])
		}
	}
	// Least privilege (docs/dra.md lists exactly these; the e2e tier 3 checks can-i on the cluster).
	var got []string
	for _, r := range rules {
		got = append(got, fmt.Sprintf("%v %v %v", r.APIGroups, r.Resources, r.Verbs))
	}
	want := []string{
		"[resource.k8s.io] [resourceslices] [list watch create update delete]",
		"[resource.k8s.io] [resourceclaims] [get]",
		"[resource.k8s.io] [resourceclaims/status] [update]",
		"[] [nodes] [get]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ClusterRole memifnet-dra rules:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	checkDRAPolicies(t, objs)
	for _, o := range objs {
		if r, ok := o.(*rbacv1.Role); ok && r.Name == "memifnet-dra-events" {
			if len(r.Rules) != 1 || fmt.Sprintf("%v %v %v", r.Rules[0].APIGroups, r.Rules[0].Resources, r.Rules[0].Verbs) != "[events.k8s.io] [events] [create patch]" {
				t.Errorf("Role default/memifnet-dra-events rules %+v, want create and patch events.k8s.io events only", r.Rules)
			}
		}
	}
	spec := daemonSet(t, objs).Spec.Template.Spec
	dp := container(t, spec.Containers, "deviceplugin")
	mounted := map[string]bool{}
	for _, m := range dp.VolumeMounts {
		mounted[m.MountPath] = true
	}
	for _, p := range []string{kubeletDir + "/plugins", kubeletDir + "/plugins_registry", "/var/run/cdi", "/var/run/secrets/kubernetes.io/serviceaccount"} {
		if !mounted[p] {
			t.Errorf("deviceplugin: %s not mounted", p)
		}
	}
	if !slices.ContainsFunc(dp.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Error("deviceplugin: NODE_NAME must come from spec.nodeName")
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if c.Name == "deviceplugin" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "api-token" {
				t.Errorf("container %s mounts the API token", c.Name)
			}
		}
	}
}

// examples/dra-link.yaml: one claim with two requests on socket.memifnet.io and a PortConfig,
// shared by two hardened pods that each take one request and run memif-perf --verify on the
// port named after it. examples/dra-host-port.yaml: a template for a port and a unit.
func TestDRAExamples(t *testing.T) {
	read := func(f string) []any {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var out []any
		for i, doc := range strings.Split(string(b), "\n---\n") {
			out = append(out, decode(t, fmt.Sprintf("%s #%d", f, i+1), []byte(doc)))
		}
		return out
	}
	link := read("examples/dra-link.yaml")
	var claim *resourcev1.ResourceClaim
	var pods []*corev1.Pod
	for _, o := range link {
		switch o := o.(type) {
		case *resourcev1.ResourceClaim:
			claim = o
		case *corev1.Pod:
			pods = append(pods, o)
		default:
			t.Errorf("dra-link.yaml: unexpected %T", o)
		}
	}
	if claim == nil || len(claim.Spec.Devices.Requests) != 2 || len(pods) != 2 {
		t.Fatalf("dra-link.yaml: want one claim with two requests and two pods")
	}
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly == nil || r.Exactly.DeviceClassName != "socket.memifnet.io" {
			t.Errorf("request %s: device class %+v", r.Name, r.Exactly)
		}
	}
	checkPortConfigs(t, claim.Spec.Devices.Config)
	used := map[string]bool{}
	for _, p := range pods {
		checkPodSpecs(t, p)
		if len(p.Spec.ResourceClaims) != 1 || p.Spec.ResourceClaims[0].ResourceClaimName == nil || *p.Spec.ResourceClaims[0].ResourceClaimName != claim.Name {
			t.Errorf("pod %s: must use claim %s", p.Name, claim.Name)
			continue
		}
		c := p.Spec.Containers[0]
		if len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != p.Spec.ResourceClaims[0].Name {
			t.Errorf("pod %s: container claims %+v", p.Name, c.Resources.Claims)
			continue
		}
		req := c.Resources.Claims[0].Request
		used[req] = true
		if v, _ := flagValue(c.Args, "port"); v != req || !slices.Contains(c.Args, "--verify") {
			t.Errorf("pod %s: memif-perf %q must verify the port named after its request %q", p.Name, c.Args, req)
		}
		for rn := range c.Resources.Limits {
			if strings.HasPrefix(string(rn), "memifnet.io/") {
				t.Errorf("pod %s: asks for %s next to the claim", p.Name, rn)
			}
		}
		if _, ok := p.Annotations[portsKey]; ok {
			t.Errorf("pod %s: a DRA pod needs no %s annotation", p.Name, portsKey)
		}
	}
	if len(used) != 2 {
		t.Errorf("the pods take requests %v, want one end each", used)
	}
	host := read("examples/dra-host-port.yaml")
	tmpl, ok := host[0].(*resourcev1.ResourceClaimTemplate)
	if !ok {
		t.Fatalf("dra-host-port.yaml: first object %T, want a ResourceClaimTemplate", host[0])
	}
	checkPortConfigs(t, tmpl.Spec.Spec.Devices.Config)
	if p, ok := host[1].(*corev1.Pod); !ok || len(p.Spec.ResourceClaims) != 1 || p.Spec.ResourceClaims[0].ResourceClaimTemplateName == nil {
		t.Errorf("dra-host-port.yaml: the pod must use the template")
	} else {
		checkPodSpecs(t, p)
	}
	// Both run next to the node agent on a 2-core node.
	if sum := cpuRequests(build(t, "overlays/dra")) + cpuRequests(link); sum > 2000 {
		t.Errorf("dra-link.yaml: CPU requests %dm with the node agent's: more than a 2-core node", sum)
	}
}

// checkPortConfigs: every opaque config is memifnet.io's PortConfig with known fields.
func checkPortConfigs(t *testing.T, cfgs []resourcev1.DeviceClaimConfiguration) {
	t.Helper()
	fields := append([]string{"apiVersion", "kind"}, slices.DeleteFunc(slices.Clone(portFields), func(f string) bool { return f == "peer" })...)
	for _, c := range cfgs {
		if c.Opaque == nil || c.Opaque.Driver != names.DRADriver {
			t.Errorf("config %+v: want opaque parameters for %s", c, names.DRADriver)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(c.Opaque.Parameters.Raw, &m); err != nil {
			t.Fatal(err)
		}
		if m["apiVersion"] != "memifnet.io/v1alpha1" || m["kind"] != "PortConfig" {
			t.Errorf("parameters %v: want memifnet.io/v1alpha1 PortConfig", m)
		}
		for k := range m {
			if !slices.Contains(fields, k) {
				t.Errorf("PortConfig field %q is not one the driver knows (docs/dra.md)", k)
			}
		}
	}
}

// checkDRAPolicies: the admission policies that confine the node agent's token (docs/security.md
// D6-D8) match the agent's service account, key on the token's node name, cover every write the
// RBAC allows, fail closed and are bound to deny.
func checkDRAPolicies(t *testing.T, objs []any) {
	t.Helper()
	const user = "system:serviceaccount:" + namespace + ":memifnet"
	if sa := daemonSet(t, objs).Spec.Template.Spec.ServiceAccountName; "system:serviceaccount:"+namespace+":"+sa != user {
		t.Fatalf("the node agent runs as service account %s, the policies match %s", sa, user)
	}
	covers := map[string]string{"memifnet-dra-resourceslices": "resourceslices CREATE,UPDATE,DELETE", "memifnet-dra-claim-status": "resourceclaims/status UPDATE"}
	bound := map[string]bool{}
	for _, o := range objs {
		if b, ok := o.(*admissionregv1.ValidatingAdmissionPolicyBinding); ok {
			if b.Spec.PolicyName == b.Name && slices.Equal(b.Spec.ValidationActions, []admissionregv1.ValidationAction{admissionregv1.Deny}) &&
				b.Spec.ParamRef == nil && b.Spec.MatchResources == nil {
				bound[b.Name] = true
			}
		}
	}
	for _, o := range objs {
		p, ok := o.(*admissionregv1.ValidatingAdmissionPolicy)
		if !ok {
			continue
		}
		want, known := covers[p.Name]
		if !known {
			t.Errorf("unexpected policy %s", p.Name)
			continue
		}
		delete(covers, p.Name)
		if !bound[p.Name] {
			t.Errorf("policy %s: no binding of the same name that denies", p.Name)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregv1.Fail {
			t.Errorf("policy %s: failurePolicy must be Fail", p.Name)
		}
		var rules []string
		for _, r := range p.Spec.MatchConstraints.ResourceRules {
			var ops []string
			for _, op := range r.Operations {
				ops = append(ops, string(op))
			}
			rules = append(rules, strings.Join(r.Resources, ",")+" "+strings.Join(ops, ","))
			if !slices.Equal(r.APIGroups, []string{"resource.k8s.io"}) || !slices.Equal(r.APIVersions, []string{"*"}) {
				t.Errorf("policy %s: rule %+v must cover every version of resource.k8s.io", p.Name, r)
			}
		}
		if !slices.Equal(rules, []string{want}) {
			t.Errorf("policy %s covers %q, want %q", p.Name, rules, want)
		}
		if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != "request.userInfo.username == '"+user+"'" {
			t.Errorf("policy %s: matchConditions %+v, want the node agent's user only", p.Name, p.Spec.MatchConditions)
		}
		if len(p.Spec.Variables) == 0 || p.Spec.Variables[0].Name != "nodeName" ||
			!strings.Contains(p.Spec.Variables[0].Expression, "request.userInfo.extra[?'authentication.kubernetes.io/node-name']") {
			t.Errorf("policy %s: its first variable must be the token's node name", p.Name)
		}
		if len(p.Spec.Validations) < 2 || p.Spec.Validations[0].Expression != "variables.nodeName != ''" {
			t.Errorf("policy %s: its first validation must refuse a token without a node name", p.Name)
		}
		if p.Name == "memifnet-dra-resourceslices" {
			checkSlicePolicy(t, p)
		}
	}
	for name := range covers {
		t.Errorf("no policy %s", name)
	}
}

// checkSlicePolicy: a slice the agent writes (as it is and as it will be) must be of driver
// memifnet.io, on the token's node and in the pool named after it (security D6, D11): the driver
// publishes one pool named after its node (dra.TestResources). The CEL itself runs in tier 3's
// draAttacks.
func checkSlicePolicy(t *testing.T, p *admissionregv1.ValidatingAdmissionPolicy) {
	t.Helper()
	vars := map[string]string{}
	for _, v := range p.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	if !strings.Contains(vars["slices"], "[oldObject, object]") {
		t.Errorf("policy %s: an update must be checked as it was and as it will be: %q", p.Name, vars["slices"])
	}
	f := vars["foreign"]
	for _, want := range []string{"s.spec.driver != '" + names.DRADriver + "'", "s.spec.?nodeName.orValue('') != variables.nodeName",
		"s.spec.pool.name != variables.nodeName"} {
		if !strings.Contains(f, want) {
			t.Errorf("policy %s: variable foreign %q lacks %q", p.Name, f, want)
		}
	}
	if v := p.Spec.Validations[1]; v.Expression != "variables.foreign.size() == 0" || !strings.Contains(v.MessageExpression, "' in pool ' + variables.foreign[0].spec.pool.name") {
		t.Errorf("policy %s: the second validation must refuse any foreign slice naming its pool: %+v", p.Name, v)
	}
}

// examples/statefulset-link.yaml: replica i of nf-a (server) and replica i of nf-b (client) resolve
// their one port to the same link nf-i, the pods run hardened and ask for nothing (the webhook adds
// the resources), and all six fit on a 2-core node with the agent. Tier 3's Ordinal step runs it.
func TestStatefulSetExample(t *testing.T) {
	b, err := os.ReadFile("examples/statefulset-link.yaml")
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	var sets []any
	for i, doc := range strings.Split(string(b), "\n---\n") {
		o := decode(t, fmt.Sprintf("examples/statefulset-link.yaml #%d", i+1), []byte(doc))
		ss, ok := o.(*appsv1.StatefulSet)
		if !ok {
			t.Fatalf("document %d: %T, want a StatefulSet", i+1, o)
		}
		sets = append(sets, ss)
		checkPodSpecs(t, &corev1.Pod{Spec: ss.Spec.Template.Spec})
		for _, c := range ss.Spec.Template.Spec.Containers {
			if _, asks := c.Resources.Limits[corev1.ResourceName(names.SocketResource)]; asks {
				t.Errorf("%s: asks for %s itself; the webhook adds it", ss.Name, names.SocketResource)
			}
		}
		if _, err := ports.Parse(ss.Spec.Template.Annotations[names.PortsAnnotation]); err == nil {
			t.Errorf("%s: the annotation parses without the pod's labels: no {ordinal}", ss.Name)
		}
		for _, ord := range []string{"0", "2", "3"} {
			ps, err := ports.ParseForPod(ss.Spec.Template.Annotations[names.PortsAnnotation], map[string]string{names.PodIndexLabel: ord})
			if err != nil || len(ps) != 1 || ps[0].Link != "nf-"+ord {
				t.Fatalf("%s replica %s: ports %+v, %v; want one port on link nf-%s", ss.Name, ord, ps, err, ord)
			}
			roles[ss.Name] = ps[0].Role
		}
	}
	if want := map[string]string{"nf-a": "server", "nf-b": "client"}; !reflect.DeepEqual(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
	var pods []any
	for _, o := range sets {
		ss := o.(*appsv1.StatefulSet)
		for range *ss.Spec.Replicas {
			pods = append(pods, &corev1.Pod{Spec: ss.Spec.Template.Spec})
		}
	}
	if sum := cpuRequests(build(t, ".")) + cpuRequests(pods); sum > 2000 {
		t.Errorf("CPU requests %dm with the node agent's: more than a 2-core node", sum)
	}
}
