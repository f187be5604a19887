//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// The second driver of the cross-driver claim: a NIC driver as DRANET or the SR-IOV DRA driver
// publishes it, played by a ResourceSlice the test creates (it has no kubelet plugin).
const (
	t3NICDriver = "nic.example.com"
	t3NICSlice  = "dra-numa-nics"
	t3NUMAClaim = "dra-numa"
	t3NUMAPod   = "dra-numa"
)

// draNUMA (issue 20 part 4): one claim spans a memif socket and a NIC of another driver on one
// NUMA node. The NIC driver's slice (created here) lists a NIC on another NUMA node first and one
// on the node of memifnet.io's devices second; the claim asks for a socket and a NIC with
// matchAttribute dra.net/numaNode, which memifnet.io also publishes. The real scheduler allocates
// the socket and the second NIC. The pod then stays ContainerCreating: the kubelet refuses to
// prepare the claim, since no kubelet plugin of the NIC driver is registered, and checks that for
// every driver before it prepares anything, so memifnet.io prepares nothing either (its
// checkpoint does not name the claim). Deleting the pod, the claim, the slice and the class
// leaves nothing. devs are memifnet.io's devices on the node.
func (x *tier3) draNUMA(ctx context.Context, t *testing.T, devs []resourcev1.Device) {
	start := time.Now()
	numa := *devs[0].Attributes["numaNode"].IntValue
	for _, d := range devs {
		n := d.Attributes["dra.net/numaNode"].IntValue
		if n == nil || *n != *d.Attributes["numaNode"].IntValue {
			t.Fatalf("device %s: dra.net/numaNode %v, numaNode %v; want the same int", d.Name, n, d.Attributes["numaNode"].IntValue)
		}
		if *n != numa {
			t.Fatalf("device %s on NUMA node %d, %s on %d: the test wants one node", d.Name, *n, devs[0].Name, numa)
		}
	}
	x.logf("dra: every memifnet.io device also publishes dra.net/numaNode (%d)", numa)
	objs := fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: %[1]s}
spec:
  selectors: [{cel: {expression: 'device.driver == "%[1]s"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %[2]s}
spec:
  driver: %[1]s
  nodeName: %[3]s
  pool: {name: %[3]s-nics, generation: 1, resourceSliceCount: 1}
  devices:
    - name: nic-far
      attributes: {dra.net/numaNode: {int: %[5]d}, dra.net/ifName: {string: ens2f0}}
    - name: nic-near
      attributes: {dra.net/numaNode: {int: %[4]d}, dra.net/ifName: {string: ens1f0}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %[6]s}
spec:
  devices:
    requests:
      - name: port
        exactly: {deviceClassName: socket.memifnet.io}
      - name: nic
        exactly: {deviceClassName: %[1]s}
    constraints:
      - requests: [port, nic]
        matchAttribute: dra.net/numaNode
---
`, t3NICDriver, t3NICSlice, cluster.NodeName, numa, numa+1, t3NUMAClaim) + claimPausePod(t3NUMAPod, t3NUMAClaim)
	x.undoWith(t,
		[]string{"delete", "pod", t3NUMAPod, "--ignore-not-found", "--wait=true", "--timeout=60s"},
		[]string{"delete", "resourceclaim", t3NUMAClaim, "--ignore-not-found", "--wait=true", "--timeout=60s"},
		[]string{"delete", "resourceslice", t3NICSlice, "--ignore-not-found"},
		[]string{"delete", "deviceclass", t3NICDriver, "--ignore-not-found"})
	x.kubectlIn(ctx, t, objs, "apply", "-f", "-")

	var c *resourcev1.ResourceClaim
	if err := node.Poll(ctx, time.Minute, t3NUMAClaim+" allocated", func() (bool, error) {
		var err error
		c, err = x.cs.ResourceV1().ResourceClaims("default").Get(ctx, t3NUMAClaim, metav1.GetOptions{})
		return err == nil && c.Status.Allocation != nil, err
	}); err != nil {
		t.Fatalf("%v: %+v", err, c.Status)
	}
	got := map[string]resourcev1.DeviceRequestAllocationResult{}
	for _, r := range c.Status.Allocation.Devices.Results {
		got[r.Request] = r
	}
	port, nic := got["port"], got["nic"]
	if len(got) != 2 || port.Driver != names.DRADriver || !strings.HasPrefix(port.Device, names.DRASlotPrefix+"-") ||
		nic.Driver != t3NICDriver || nic.Pool != cluster.NodeName+"-nics" || nic.Device != "nic-near" {
		t.Fatalf("claim %s allocation %+v: want port a memifnet.io slot and nic %s's nic-near (NUMA node %d, as the slot)", t3NUMAClaim, got, t3NICDriver, numa)
	}
	x.logf("dra: claim %s allocated across drivers on NUMA node %d: port %s/%s, nic %s/%s (not nic-far, listed first, on node %d)",
		t3NUMAClaim, numa, port.Driver, port.Device, nic.Driver, nic.Device, numa+1)

	// The pod: the kubelet says why it cannot prepare the claim, and nothing is prepared.
	var msg string
	if err := node.Poll(ctx, time.Minute, t3NUMAPod+" refused by the kubelet", func() (bool, error) {
		evs, err := x.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + t3NUMAPod})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedPrepareDynamicResources" && strings.Contains(e.Message, "DRA driver "+t3NICDriver+" is not registered") {
				msg = e.Message
			}
		}
		return msg != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	p, err := x.cs.CoreV1().Pods("default").Get(ctx, t3NUMAPod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != cluster.NodeName {
		t.Errorf("pod %s: phase %s on %q, want Pending on %s", t3NUMAPod, p.Status.Phase, p.Spec.NodeName, cluster.NodeName)
	}
	if _, ok := draCheckpoint(t)[string(c.UID)]; ok {
		t.Errorf("memifnet.io prepared claim %s although the kubelet cannot prepare its NIC", t3NUMAClaim)
	}
	x.logf("dra: pod %s stays Pending, nothing prepared: %s", t3NUMAPod, msg)
	x.kubectl(ctx, t, "delete", "pod", t3NUMAPod, "--wait=true", "--timeout=60s")
	x.kubectl(ctx, t, "delete", "resourceclaim", t3NUMAClaim, "--wait=true", "--timeout=60s")
	x.kubectl(ctx, t, "delete", "resourceslice", t3NICSlice)
	x.kubectl(ctx, t, "delete", "deviceclass", t3NICDriver)
	x.logf("dra: cross-driver NUMA claim done (%.1f s)", time.Since(start).Seconds())
}

// draNetworkData: an ip-mode link claim with static addresses per request (no IPAM under DRA),
// prepared for one pause pod holding both ends: the real API server takes the driver's status,
// whose standard networkData names each port as the interface, with its addresses and no MAC
// (an ip port has none). Deleting the pod and the claim unprepares it.
func (x *tier3) draNetworkData(ctx context.Context, t *testing.T) {
	const name = "dra-ip"
	start := time.Now()
	want := map[string][]string{"east": {"192.0.2.1/24", "2001:db8::1/64"}, "west": {"192.0.2.2/24", "2001:db8::2/64"}}
	objs := fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %[1]s}
spec:
  devices:
    requests:
      - name: east
        exactly: {deviceClassName: socket.memifnet.io}
      - name: west
        exactly: {deviceClassName: socket.memifnet.io}
    config:
      - requests: [east]
        opaque: {driver: memifnet.io, parameters: {apiVersion: memifnet.io/v1alpha1, kind: PortConfig, mode: ip, ips: ["192.0.2.1/24", "2001:db8::1/64"]}}
      - requests: [west]
        opaque: {driver: memifnet.io, parameters: {apiVersion: memifnet.io/v1alpha1, kind: PortConfig, mode: ip, ips: ["192.0.2.2/24", "2001:db8::2/64"]}}
---
`, name) + claimPausePod(name, name)
	x.undoWith(t,
		[]string{"delete", "pod", name, "--ignore-not-found", "--wait=true", "--timeout=60s"},
		[]string{"delete", "resourceclaim", name, "--ignore-not-found", "--wait=true", "--timeout=60s"})
	x.kubectlIn(ctx, t, objs, "apply", "-f", "-")
	var c *resourcev1.ResourceClaim
	if err := node.Poll(ctx, time.Minute, name+" reported", func() (bool, error) {
		var err error
		c, err = x.cs.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(c.Status.Devices) == 2, err
	}); err != nil {
		t.Fatalf("%v: %+v", err, c.Status)
	}
	for _, d := range c.Status.Devices {
		nd := d.NetworkData
		if d.Driver != names.DRADriver || nd == nil || want[nd.InterfaceName] == nil || !slices.Equal(nd.IPs, want[nd.InterfaceName]) || nd.HardwareAddress != "" {
			t.Fatalf("claim %s device %s: networkData %+v; want a port east or west with its addresses %v and no MAC", name, d.Device, nd, want)
		}
	}
	x.logf("dra: claim %s status networkData: %s %v, %s %v", name, c.Status.Devices[0].NetworkData.InterfaceName, c.Status.Devices[0].NetworkData.IPs,
		c.Status.Devices[1].NetworkData.InterfaceName, c.Status.Devices[1].NetworkData.IPs)
	x.kubectl(ctx, t, "delete", "pod", name, "--wait=true", "--timeout=60s")
	x.kubectl(ctx, t, "delete", "resourceclaim", name, "--wait=true", "--timeout=60s")
	if err := node.Poll(ctx, 30*time.Second, name+" unprepared", func() (bool, error) {
		_, ok := draCheckpoint(t)[string(c.UID)]
		return !ok, nil
	}); err != nil {
		t.Fatal(err)
	}
	x.logf("dra: ip-mode claim with static addresses done (%.1f s)", time.Since(start).Seconds())
}
