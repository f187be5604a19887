//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// nadKubeconfig is the kubeconfig the Multus overlay's NetworkAttachmentDefinition gives
// memif-cni: the kubelet's own, where kubeadm keeps it, which this cluster's kubelet uses.
func (x *tier3) nadKubeconfig(ctx context.Context, t *testing.T) string {
	t.Helper()
	raw := x.kubectl(ctx, t, "-n", t3Namespace, "get", "network-attachment-definitions.k8s.cni.cncf.io", "memif", "-o", "jsonpath={.spec.config}")
	var conf struct {
		Plugins []struct {
			Kubeconfig string `json:"kubeconfig"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(raw), &conf); err != nil || len(conf.Plugins) != 1 {
		t.Fatalf("NAD memifnet-system/memif config %q: %v", raw, err)
	}
	kc := conf.Plugins[0].Kubeconfig
	if kc != x.c.Paths.KubeletKubeconfig { // not fatal: the rest shows what the other credential reads
		t.Errorf("the NAD gives memif-cni kubeconfig %q, want the kubelet's %s", kc, x.c.Paths.KubeletKubeconfig)
	}
	if _, err := os.Stat(kc); err != nil {
		t.Fatal(err)
	}
	return kc
}

// multusLeastPrivilege (issue 18 part 7, docs/security.md #26): what memif-cni's credentials
// reach. The node agent's service account, which the overlay used to put on every node with
// cluster-wide get pods, reads no pod any more; the node's credentials memif-cni uses now read
// only pods bound to the node: not one bound to another node, and no list of every pod.
func (x *tier3) multusLeastPrivilege(ctx context.Context, t *testing.T) {
	// A pod of another namespace on another node (no kubelet: it never starts).
	elsewhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "multus-elsewhere", Namespace: t3OtherNS},
		Spec: corev1.PodSpec{NodeName: t3OtherNode, Containers: []corev1.Container{{Name: "c", Image: t3PauseImage}}}}
	x.kubectl(ctx, t, "create", "namespace", t3OtherNS)
	x.undoWith(t, []string{"delete", "namespace", t3OtherNS, "--ignore-not-found", "--wait=true"})
	t.Cleanup(func() { // first (cleanups run last first): the pod of a node without a kubelet, at once
		x.cs.CoreV1().Pods(t3OtherNS).Delete(context.Background(), elsewhere.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	if _, err := x.cs.CoreV1().Pods(t3OtherNS).Create(ctx, elsewhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The service account's token (as the old overlay's installer wrote it to the node).
	tok, err := x.cs.CoreV1().ServiceAccounts(t3Namespace).CreateToken(ctx, "memifnet", &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", x.c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	saCfg := rest.AnonymousClientConfig(admin)
	saCfg.BearerToken = tok.Status.Token
	sa := kubernetes.NewForConfigOrDie(saCfg)
	for _, p := range [][2]string{{"default", "memif-multus-rx"}, {t3OtherNS, elsewhere.Name}} {
		if _, err := sa.CoreV1().Pods(p[0]).Get(ctx, p[1], metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("the memifnet service account's token reads pod %s/%s: %v; want forbidden", p[0], p[1], err)
		}
	}
	x.logf("multus: the memifnet service account's token reads no pod (forbidden)")

	nodeCfg, err := clientcmd.BuildConfigFromFlags("", x.c.Paths.KubeletKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	nodeCS := kubernetes.NewForConfigOrDie(nodeCfg)
	if _, err := nodeCS.CoreV1().Pods("default").Get(ctx, "memif-multus-rx", metav1.GetOptions{}); err != nil {
		t.Fatalf("the node's credentials cannot read its own pod: %v", err)
	}
	_, err = nodeCS.CoreV1().Pods(t3OtherNS).Get(ctx, elsewhere.Name, metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the node's credentials read pod %s/%s of node %s: %v; want forbidden", t3OtherNS, elsewhere.Name, t3OtherNode, err)
	}
	x.logf("multus: the node's credentials (%s) read the node's own pods, not %s/%s on %s: %v", x.c.Paths.KubeletKubeconfig, t3OtherNS, elsewhere.Name, t3OtherNode, err)
	if _, err := nodeCS.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the node's credentials list every pod: %v; want forbidden", err)
	}
}

// multusDeviceInfo: Multus publishes the NPWG device-info memif-cni writes for each port in the
// pod's network-status (device-info spec 1.1.0 section 6). Its memif role says who creates the
// socket file: memif-multus-rx serves the link (its annotation says so), so its app creates the
// socket, "master"; memif-multus-tx connects to it, "slave". The path is the link's socket in
// the pod's slot.
func (x *tier3) multusDeviceInfo(ctx context.Context, t *testing.T) {
	for pod, role := range map[string]string{"memif-multus-rx": "master", "memif-multus-tx": "slave"} {
		p, err := x.cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		raw := p.Annotations["k8s.v1.cni.cncf.io/network-status"]
		var status []struct {
			Name       string `json:"name"`
			DeviceInfo *struct {
				Type, Version string
				Memif         *struct{ Role, Path, Mode string } `json:"memif"`
			} `json:"device-info"`
		}
		if err := json.Unmarshal([]byte(raw), &status); err != nil {
			t.Fatalf("%s: network-status %q: %v", pod, raw, err)
		}
		found := false
		for _, s := range status {
			if s.Name != t3Namespace+"/memif" {
				continue
			}
			found = true
			di := s.DeviceInfo
			if di == nil || di.Type != "memif" || di.Version != "1.1.0" || di.Memif == nil || di.Memif.Role != role ||
				di.Memif.Mode != "ethernet" || !strings.HasPrefix(di.Memif.Path, "/run/memifnet/slot-") || !strings.HasSuffix(di.Memif.Path, "/link/memif.sock") {
				t.Errorf("%s: network-status %s; want device-info type memif 1.1.0, role %s, mode ethernet, the link's socket in the slot", pod, raw, role)
			}
		}
		if !found {
			t.Errorf("%s: network-status %s has no %s/memif entry", pod, raw, t3Namespace)
		}
	}
	x.logf("multus: network-status device-info: memif-multus-rx (server) role master, memif-multus-tx (client) role slave")
}
