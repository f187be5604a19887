//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// The admission policies of the DRA overlay (docs/security.md D6-D8, D11) against two real
// agents, a step of TestTier3MultiNode.

// The addresses an agent writes into a claim's networkData: a lie about another node's link,
// and a change to its own node's (another address: writing what is there already changes
// nothing, which the policy lets through).
const (
	mnForgedIP = "192.0.2.66/24"
	mnOwnIP    = "192.0.2.77/24"
)

// mnProbeLabel is the label an agent puts on a ResourceSlice (and takes off again).
const mnProbeLabel = "e2e.memifnet.io/probe"

// mnDRAAgents: on each memifnet node a link runs on a claim allocated there (pods pinned by
// nodeSelector), passing verified traffic. Each node's agent, with the token its kubelet
// projected into its pod (read inside the node), plays a compromised node against the other:
// it can neither create a slice on the other node nor update or delete the other node's slice,
// nor write the status of the claim allocated on the other node; it can update its own node's
// slice and write its own node's claim status, and create a slice on its own node (dry run: a
// real one would make its pool disagree). Every refusal names the policy; the refused objects
// are unchanged; both links keep passing traffic.
func (x *tier3) mnDRAAgents(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	mem := []cluster.NodeSpec{nodes[0], nodes[1]}
	var held []string
	var y strings.Builder
	for _, n := range mem {
		link := fmt.Sprintf("mn-dra-n%d", n.Index)
		held = append(held, link)
		fmt.Fprintf(&y, "%s---\n%s---\n%s---\n", draLinkClaim(link),
			mnDRAPod(link+"-rx", link, "east", n.Name, "--mode=rx", "--verify", "--size=1500", "--duration=0", "--rx-mode=interrupt", "--connect-timeout=2m"),
			mnDRAPod(link+"-tx", link, "west", n.Name, "--mode=tx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m"))
	}
	x.kubectlIn(ctx, t, y.String(), "apply", "-f", "-")
	agents := make([]*kubernetes.Clientset, len(mem))
	for i, n := range mem {
		if err := node.Poll(ctx, 2*time.Minute, held[i]+"-rx receiving", func() (bool, error) {
			return x.rxProgress(ctx, held[i]+"-rx") > 0, nil
		}); err != nil {
			t.Fatalf("%v; rx logs:\n%s\ntx logs:\n%s", err, x.logs(ctx, "default", held[i]+"-rx"), x.logs(ctx, "default", held[i]+"-tx"))
		}
		c := x.preparedClaim(ctx, t, held[i])
		if r := c.Status.Allocation.Devices.Results; r[0].Pool != n.Name || r[1].Pool != n.Name {
			t.Fatalf("claim %s allocated %+v, want in pool %s", held[i], r, n.Name)
		}
		name, uid := x.mnAgent(ctx, t, n.Name)
		root, _, err := x.c.NodeView(n.Index)
		if err != nil {
			t.Fatal(err)
		}
		agents[i] = x.agentTokenClient(ctx, t, root, uid, n.Name)
		x.logf("dra: link %s runs on %s; its agent %s's token read inside the node", held[i], n.Name, name)
	}
	for i, n := range mem {
		o := 1 - i
		x.mnDRASlicesCross(ctx, t, agents[i], n, mem[o])
		x.mnDRAClaimsCross(ctx, t, agents[i], n, held[i], held[o])
	}
	for _, link := range held {
		x.trafficFlows(ctx, t, link+"-rx", "on "+link+" after the agents' writes")
	}
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", "default", "--wait=true")
	x.kubectl(ctx, t, "delete", "resourceclaims", "--all", "-n", "default", "--wait=true")
	x.mnDRANoLeftovers(ctx, t, nodes)
}

// mnSliceOf is node n's memifnet.io ResourceSlice, read as the admin.
func (x *tier3) mnSliceOf(ctx context.Context, t *testing.T, n string) *resourcev1.ResourceSlice {
	t.Helper()
	sl, err := x.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + names.DRADriver + ",spec.nodeName=" + n})
	if err != nil || len(sl.Items) != 1 {
		t.Fatalf("memifnet.io slices of node %s: %v %v", n, sl, err)
	}
	return &sl.Items[0]
}

// mnLabelSlice has client add (on) or remove mnProbeLabel on node n's slice, retrying conflicts
// (the driver may be writing it), and returns the last error.
func (x *tier3) mnLabelSlice(ctx context.Context, t *testing.T, client *kubernetes.Clientset, n string, on bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := x.mnSliceOf(ctx, t, n)
		if on {
			s.Labels = map[string]string{mnProbeLabel: "agent"}
		} else {
			delete(s.Labels, mnProbeLabel)
		}
		_, err := client.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
}

// mnDRASlicesCross plays node own's agent against node other's ResourceSlices, and its own.
func (x *tier3) mnDRASlicesCross(ctx context.Context, t *testing.T, agent *kubernetes.Clientset, own, other cluster.NodeSpec) {
	api := agent.ResourceV1().ResourceSlices()
	why := "not one of driver " + names.DRADriver + " on node " + other.Name + " in pool " + other.Name
	who := "agent of " + own.Name + ": "
	forged := slice("mn-forged-"+other.Name, names.DRADriver, other.Name)
	for _, dry := range [][]string{nil, {metav1.DryRunAll}} {
		_, err := api.Create(ctx, forged, metav1.CreateOptions{DryRun: dry})
		refusedBy(t, fmt.Sprintf("%screate a slice on %s (dry run %v)", who, other.Name, dry), err, t3SlicesPolicy, why)
	}
	if _, err := x.cs.ResourceV1().ResourceSlices().Get(ctx, forged.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("forged slice %s: %v", forged.Name, err)
	}
	err := x.mnLabelSlice(ctx, t, agent, other.Name, true)
	refusedBy(t, who+"update "+other.Name+"'s slice", err, t3SlicesPolicy, why)
	if s := x.mnSliceOf(ctx, t, other.Name); s.Labels[mnProbeLabel] != "" {
		t.Errorf("%s's slice %s got the agent of %s's label: %v", other.Name, s.Name, own.Name, s.Labels)
	}
	victim := x.mnSliceOf(ctx, t, other.Name)
	err = api.Delete(ctx, victim.Name, metav1.DeleteOptions{})
	refusedBy(t, who+"delete "+other.Name+"'s slice", err, t3SlicesPolicy, why)
	if s := x.mnSliceOf(ctx, t, other.Name); s.UID != victim.UID {
		t.Errorf("%s's slice %s replaced (%s, was %s)", other.Name, s.Name, s.UID, victim.UID)
	}
	x.logf("dra: %srefused creating a slice on %s, updating and deleting %s's slice %s", who, other.Name, other.Name, victim.Name)

	mine := slice("mn-probe-"+own.Name, names.DRADriver, own.Name)
	if _, err := api.Create(ctx, mine, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("%screate a slice on its own node (dry run): %v", who, err)
	}
	for _, on := range []bool{true, false} {
		if err := x.mnLabelSlice(ctx, t, agent, own.Name, on); err != nil {
			t.Errorf("%supdate its own slice (label %v): %v", who, on, err)
		}
	}
	x.logf("dra: %smay create (dry run) and update a slice on its own node", who)
}

// mnForge has client change the memifnet.io entries of claim's status as an attacker would:
// address ip in networkData, or the entries dropped. It retries conflicts (the driver writes
// conditions) and returns the claim stored.
func mnForge(ctx context.Context, client *kubernetes.Clientset, claim, ip string, drop bool) (*resourcev1.ResourceClaim, error) {
	api := client.ResourceV1().ResourceClaims("default")
	var out *resourcev1.ResourceClaim
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := api.Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if drop {
			c.Status.Devices = slices.DeleteFunc(c.Status.Devices, func(d resourcev1.AllocatedDeviceStatus) bool { return d.Driver == names.DRADriver })
		}
		for i := range c.Status.Devices {
			if d := &c.Status.Devices[i]; d.Driver == names.DRADriver {
				if d.NetworkData == nil {
					d.NetworkData = &resourcev1.NetworkDeviceData{}
				}
				d.NetworkData.IPs = []string{ip}
			}
		}
		out, err = api.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// mnStatusOf is claim c's memifnet.io status entries as "device ips".
func mnStatusOf(c *resourcev1.ResourceClaim) []string {
	var out []string
	for _, d := range c.Status.Devices {
		if d.Driver != names.DRADriver {
			continue
		}
		var ips []string
		if d.NetworkData != nil {
			ips = d.NetworkData.IPs
		}
		out = append(out, fmt.Sprintf("%s %v", d.Device, ips))
	}
	return out
}

// mnDRAClaimsCross plays node own's agent against the claim allocated on the other node
// (otherClaim) and its own (ownClaim).
func (x *tier3) mnDRAClaimsCross(ctx context.Context, t *testing.T, agent *kubernetes.Clientset, own cluster.NodeSpec, ownClaim, otherClaim string) {
	who := "agent of " + own.Name + ": "
	why := "the memifnet node agent on node " + own.Name + " may write status.devices entries of driver memifnet.io only for devices of claim default/" + otherClaim + " allocated on its node"
	before := mnStatusOf(x.draClaim(ctx, t, otherClaim))
	for _, drop := range []bool{false, true} {
		_, err := mnForge(ctx, agent, otherClaim, mnForgedIP, drop)
		refusedBy(t, fmt.Sprintf("%swrite the status of %s (drop %v)", who, otherClaim, drop), err, t3ClaimPolicy, why)
		if after := mnStatusOf(x.draClaim(ctx, t, otherClaim)); !slices.Equal(after, before) {
			t.Errorf("claim %s's memifnet.io status %q, was %q", otherClaim, after, before)
		}
	}
	x.logf("dra: %srefused writing the status of %s, allocated on the other node: %q kept", who, otherClaim, before)
	c, err := mnForge(ctx, agent, ownClaim, mnOwnIP, false)
	if err != nil {
		t.Fatalf("%swrite the status of %s, allocated on its node: %v", who, ownClaim, err)
	}
	got := mnStatusOf(c)
	if len(got) != 2 || !strings.Contains(got[0], mnOwnIP) || !strings.Contains(got[1], mnOwnIP) {
		t.Errorf("%s's status after its node's agent wrote it: %q", ownClaim, got)
	}
	x.logf("dra: %smay write the status of %s, allocated on its node: %q", who, ownClaim, got)
}
