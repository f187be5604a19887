//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/cluster"
)

// What a compromised node plays against (docs/security.md D6-D8): another namespace, another
// driver, another node.
const (
	t3VictimNS     = "dra-victim"
	t3OtherDriver  = "gpu.example.com"
	t3OtherNode    = "memifnet-other" // no Node object: a name on a slice or an allocation
	t3SlicesPolicy = "ValidatingAdmissionPolicy 'memifnet-dra-resourceslices'"
	t3ClaimPolicy  = "ValidatingAdmissionPolicy 'memifnet-dra-claim-status'"
)

// agentClient is a client with the node agent's own credentials: the service account token the
// kubelet projected into its pod, read from the node (where root on a compromised node finds it).
func (x *tier3) agentClient(ctx context.Context, t *testing.T) *kubernetes.Clientset {
	t.Helper()
	_, uid, _ := x.agentPod(ctx, t)
	return x.agentTokenClient(ctx, t, "/", uid, cluster.NodeName)
}

// agentTokenClient is a client with the token the kubelet of node nodeName projected into agent
// pod uid, read below root (the node's view of its paths, cluster.NodeView). It checks that the
// token is the agent's and carries its node's name, which the admission policies key on.
func (x *tier3) agentTokenClient(ctx context.Context, t *testing.T, root, uid, nodeName string) *kubernetes.Clientset {
	t.Helper()
	path := filepath.Join(root, names.KubeletDir, "pods", uid, "volumes", "kubernetes.io~projected", "api-token", "token")
	tok, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the node agent's token: %v", err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", x.c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin) // the server and its CA, no admin credentials
	cfg.BearerToken = strings.TrimSpace(string(tok))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The policies key on the node name that a pod-bound token carries: it must be there.
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := r.Status.UserInfo
	if u.Username != "system:serviceaccount:"+t3Namespace+":memifnet" || !slices.Equal(u.Extra["authentication.kubernetes.io/node-name"], []string{nodeName}) {
		t.Fatalf("the node agent's token (%s) authenticates as %s with extra %v; want the memifnet service account on node %s",
			path, u.Username, u.Extra, nodeName)
	}
	x.logf("dra: the node agent's token (%s) is %s, extra authentication.kubernetes.io/node-name %v", path, u.Username, u.Extra["authentication.kubernetes.io/node-name"])
	return cs
}

// draRBAC: `kubectl auth can-i --list` for the node agent under the DRA overlay holds exactly
// docs/dra.md's rules beyond what every service account may.
func (x *tier3) draRBAC(ctx context.Context, t *testing.T) {
	// Not fatal: the attacks below show what the rules allow.
	extra, _ := x.mayOnly(ctx, t, "", "memifnet", []string{
		"events.events.k8s.io [] [] [create patch]", // in namespace default only, where can-i --list looks
		"nodes [] [] [get]",
		"resourceclaims.resource.k8s.io [] [] [get]",
		"resourceclaims.resource.k8s.io/status [] [] [update]",
		"resourceslices.resource.k8s.io [] [] [list watch create update delete]",
		metricsReviewRules[0], metricsReviewRules[1], // the base's, sorted after these
	})
	x.logf("dra: memifnet-system/memifnet may %q besides self-reviews and discovery", extra)
}

// refusedBy reports whether err is the API server's 403 from policy, saying why, and fails the
// test (going on: each attack is independent) if not.
func refusedBy(t *testing.T, what string, err error, policy, why string) bool {
	t.Helper()
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), why) {
		t.Errorf("%s: %v; want a refusal by %s saying %q", what, err, policy, why)
		return false
	}
	return true
}

// nodeSelectorFor is a node-local allocation's nodeSelector, as the scheduler writes it.
func nodeSelectorFor(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
}

// draVictims makes, as the admin, what the compromised node goes after: in another namespace a
// pending claim of another driver, a claim of that driver allocated on another node and one of
// memifnet.io allocated on another node (the scheduler's part played by the admin); and slices of
// another driver on this node and of memifnet.io on another node. Cleaned up with the test.
func (x *tier3) draVictims(ctx context.Context, t *testing.T) {
	t.Helper()
	x.undoWith(t,
		[]string{"delete", "--ignore-not-found", "--wait=true", "namespace", t3VictimNS},
		[]string{"delete", "--ignore-not-found", "deviceclass", t3OtherDriver},
		[]string{"delete", "--ignore-not-found", "resourceslice", "victim-gpu", "victim-elsewhere", "forged-gpu-elsewhere", "forged-gpu-here", "forged-memif-elsewhere"})
	x.kubectlIn(ctx, t, `apiVersion: v1
kind: Namespace
metadata: {name: `+t3VictimNS+`}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: `+t3OtherDriver+`}
spec:
  selectors: [{cel: {expression: 'device.driver == "`+t3OtherDriver+`"'}}]
`, "apply", "-f", "-")
	claims := x.cs.ResourceV1().ResourceClaims(t3VictimNS)
	for _, c := range []struct{ name, class, driver, device string }{
		{"gpu", t3OtherDriver, "", ""},
		{"gpu-elsewhere", t3OtherDriver, t3OtherDriver, "gpu-0"},
		{"memif-elsewhere", "socket.memifnet.io", names.DRADriver, "dra-slot-000"},
	} {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: c.name},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: c.class}}}}}}
		made, err := claims.Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.driver == "" {
			continue
		}
		made.Status.Allocation = &resourcev1.AllocationResult{NodeSelector: nodeSelectorFor(t3OtherNode),
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "dev", Driver: c.driver, Pool: t3OtherNode, Device: c.device}}}}
		if _, err := claims.UpdateStatus(ctx, made, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*resourcev1.ResourceSlice{slice("victim-gpu", t3OtherDriver, cluster.NodeName), slice("victim-elsewhere", names.DRADriver, t3OtherNode)} {
		if _, err := x.cs.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func slice(name, driver, node string) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "gpu-0"}}}}
}

// draAttacks plays a compromised node (issue 18 part 1; docs/security.md D6-D8) with the node
// agent's real token: it allocates a pending claim of another namespace and driver to its node,
// reserves a claim for a pod, deallocates one, writes device status of another driver and of
// memifnet.io devices allocated on another node, publishes slices of another driver or node (or
// on its node in another node's pool) and deletes another driver's and another node's slices. Each is refused by the overlay's
// policies, naming them, and nothing changed. The rest of the DRA step (the driver publishing,
// preparing and reporting through the same policies) shows they leave the agent's own work alone.
func (x *tier3) draAttacks(ctx context.Context, t *testing.T) {
	x.draRBAC(ctx, t)
	x.draVictims(ctx, t)
	agent := x.agentClient(ctx, t)
	claims := agent.ResourceV1().ResourceClaims(t3VictimNS)
	forge := func(name, why, policy string, change func(*resourcev1.ResourceClaim)) {
		t.Helper()
		c, err := claims.Get(ctx, name, metav1.GetOptions{}) // the agent may read claims
		if err != nil {
			t.Fatal(err)
		}
		before, _ := json.Marshal(c.Status)
		change(c)
		_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		if refusedBy(t, "claim "+name+": "+why, err, policy, why) {
			x.logf("dra: compromised node: %s refused: %v", why, err)
		}
		after, err := x.cs.ResourceV1().ResourceClaims(t3VictimNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(after.Status); string(b) != string(before) {
			t.Errorf("claim %s/%s status changed: %s, was %s", t3VictimNS, name, b, before)
			// Put it back for the next attack (the claim controller may be at it too).
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := x.cs.ResourceV1().ResourceClaims(t3VictimNS).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Status = resourcev1.ResourceClaimStatus{}
				_ = json.Unmarshal(before, &cur.Status)
				_, err = x.cs.ResourceV1().ResourceClaims(t3VictimNS).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	forge("gpu", "status.allocation", t3ClaimPolicy, func(c *resourcev1.ResourceClaim) {
		c.Status.Allocation = &resourcev1.AllocationResult{NodeSelector: nodeSelectorFor(cluster.NodeName),
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "dev", Driver: t3OtherDriver, Pool: cluster.NodeName, Device: "gpu-0"}}}}
	})
	forge("gpu-elsewhere", "status.reservedFor", t3ClaimPolicy, func(c *resourcev1.ResourceClaim) {
		c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "attacker", UID: "6b0d5e55-1d4e-4c9e-9e0b-000000000001"}}
	})
	forge("memif-elsewhere", "status.allocation", t3ClaimPolicy, func(c *resourcev1.ResourceClaim) { c.Status.Allocation = nil })
	forge("gpu-elsewhere", "status.devices entries of other drivers", t3ClaimPolicy, func(c *resourcev1.ResourceClaim) {
		c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: t3OtherDriver, Pool: t3OtherNode, Device: "gpu-0"}}
	})
	forge("memif-elsewhere", "allocated on its node", t3ClaimPolicy, func(c *resourcev1.ResourceClaim) {
		c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: names.DRADriver, Pool: t3OtherNode, Device: "dra-slot-000"}}
	})

	sliceAPI := agent.ResourceV1().ResourceSlices()
	// On its own node, devices in another node's pool (D11): that pool's slices would disagree
	// and the other node's devices be blocked.
	otherPool := slice("forged-memif-other-pool", names.DRADriver, cluster.NodeName)
	otherPool.Spec.Pool.Name = t3OtherNode
	for _, s := range []*resourcev1.ResourceSlice{
		slice("forged-gpu-elsewhere", t3OtherDriver, t3OtherNode),
		slice("forged-gpu-here", t3OtherDriver, cluster.NodeName),
		slice("forged-memif-elsewhere", names.DRADriver, t3OtherNode),
		otherPool,
	} {
		_, err := sliceAPI.Create(ctx, s, metav1.CreateOptions{})
		what := "create slice of " + s.Spec.Driver + " on " + *s.Spec.NodeName + " in pool " + s.Spec.Pool.Name
		if refusedBy(t, what, err, t3SlicesPolicy, "not one of driver "+s.Spec.Driver+" on node "+*s.Spec.NodeName+" in pool "+s.Spec.Pool.Name) {
			x.logf("dra: compromised node: %s refused: %v", what, err)
		}
		if _, err := x.cs.ResourceV1().ResourceSlices().Get(ctx, s.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("forged slice %s exists: %v", s.Name, err)
		}
	}
	for name, why := range map[string]string{"victim-gpu": "driver " + t3OtherDriver + " on node " + cluster.NodeName, "victim-elsewhere": "driver " + names.DRADriver + " on node " + t3OtherNode} {
		err := sliceAPI.Delete(ctx, name, metav1.DeleteOptions{})
		if refusedBy(t, "delete slice "+name, err, t3SlicesPolicy, why) {
			x.logf("dra: compromised node: delete slice %s refused: %v", name, err)
		}
		if _, err := x.cs.ResourceV1().ResourceSlices().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("slice %s after the delete: %v", name, err)
		}
	}
	if err := sliceAPI.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.driver=" + t3OtherDriver}); !apierrors.IsForbidden(err) {
		t.Errorf("deletecollection of %s slices: %v, want forbidden (RBAC)", t3OtherDriver, err)
	}
	if t.Failed() {
		t.FailNow()
	}
	x.logf("dra: the compromised node's token could neither forge nor remove a claim's allocation, reservation or foreign device status, nor write or delete another driver's or node's slices, nor publish in another node's pool")
}
