//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// The DRA overlay's numbers (manifests/overlays/dra/deviceplugin-config-dra.yaml).
const (
	t3DRASlots = 8
	t3DRAUnits = 2
)

var (
	t3DRADir        = filepath.Join(t3StateDir, names.DRASubdir)
	t3DRACheckpoint = filepath.Join(t3DRADir, "claims.json")
)

// draLinkClaim is the YAML of a shared link claim: requests east and west on socket.memifnet.io.
func draLinkClaim(name string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: %s
spec:
  devices:
    requests:
      - name: east
        exactly: {deviceClassName: socket.memifnet.io}
      - name: west
        exactly: {deviceClassName: socket.memifnet.io}
    config:
      - opaque:
          driver: memifnet.io
          parameters: {apiVersion: memifnet.io/v1alpha1, kind: PortConfig, queues: 1}
`, name)
}

// draPerfPod is the YAML of a pod running memif-perf on the port of one request of claim.
func draPerfPod(name, claim, request string, args ...string) string {
	quoted := []string{fmt.Sprintf("%q", "--port="+request)}
	for _, a := range args {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile: {type: RuntimeDefault}
  resourceClaims:
    - name: link
      resourceClaimName: %[2]s
  containers:
    - name: perf
      image: %[3]s
      command: ["/usr/local/bin/memif-perf"]
      args: [%[4]s]
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities: {drop: ["ALL"]}
      resources:
        requests: {cpu: 200m, memory: 64Mi}
        limits: {cpu: "1", memory: 64Mi}
        claims: [{name: link, request: %[5]s}]
`, name, claim, cluster.Image, strings.Join(quoted, ", "), request)
}

// draStatus is the data the driver reports for a socket device in a claim's status.devices
// (docs/dra.md).
type draStatus struct {
	Port       string `json:"port"`
	Role       string `json:"role"`
	Socket     string `json:"socket"`
	Link       string `json:"link,omitempty"`
	HostSocket string `json:"hostSocket,omitempty"`
}

// draCheckpoint is the DRA driver's checkpoint on the node: claim UID -> prepared.
func draCheckpoint(t *testing.T) map[string]bool {
	t.Helper()
	return draCheckpointAt(t, t3DRACheckpoint)
}

// draCheckpointAt is the DRA driver's checkpoint at path (another node's, seen through its root).
func draCheckpointAt(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]bool{}
	}
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Claims []struct {
			UID      string `json:"uid"`
			Prepared bool   `json:"prepared"`
		} `json:"claims"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]bool{}
	for _, c := range f.Claims {
		out[c.UID] = c.Prepared
	}
	return out
}

func (x *tier3) draClaim(ctx context.Context, t *testing.T, name string) *resourcev1.ResourceClaim {
	t.Helper()
	c, err := x.cs.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dra: `kubectl apply -k manifests/overlays/dra` over the running install enables the DRA
// driver in the node agent. Its ResourceSlices are published; examples/dra-link.yaml and a
// second link claim run at once, each a pair of pods sharing one claim, and pass verified
// traffic; the claim status reports each port; a node agent rollout restart keeps the prepared
// claims (the checkpoint) and the traffic; a claim that cannot fit stays Pending and the
// scheduler says why; deleting the pods and claims unprepares: no claim left in the checkpoint,
// no CDI spec, no link mount, the slots scrubbed. examples/dra-host-port.yaml then runs against a
// host data plane played on the node (draHostPort). Then the chained install is put back.
func (x *tier3) dra(ctx context.Context, t *testing.T) {
	x.kubectl(ctx, t, "apply", "-k", "manifests/overlays/dra/")
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	t.Cleanup(func() {
		// Bounded: a claim that cannot be unprepared keeps its pods from going away.
		cctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		x.draRestore(cctx, t)
	})
	x.logf("dra: overlay applied, node agent rolled out with the DRA driver")

	// Slices: the node's pool holds the DRA slots and units with their attributes.
	var devs []resourcev1.Device
	if err := node.Poll(ctx, 90*time.Second, "ResourceSlices of memifnet.io", func() (bool, error) {
		sl, err := x.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + names.DRADriver})
		if err != nil {
			return false, err
		}
		devs = nil
		for _, s := range sl.Items {
			if s.Spec.NodeName != nil && *s.Spec.NodeName == cluster.NodeName && s.Spec.Pool.Name == cluster.NodeName {
				devs = append(devs, s.Spec.Devices...)
			}
		}
		return len(devs) == t3DRASlots+t3DRAUnits, nil
	}); err != nil {
		t.Fatalf("%v: %d devices", err, len(devs))
	}
	kinds := map[string]int{}
	for _, d := range devs {
		typ, numa := d.Attributes["type"].StringValue, d.Attributes["numaNode"].IntValue
		if typ == nil || numa == nil {
			t.Fatalf("device %s lacks type or numaNode: %+v", d.Name, d.Attributes)
		}
		kinds[*typ]++
		if *typ == "hugepage" && (d.Attributes["pool"].StringValue == nil || *d.Attributes["pageSize"].StringValue != "2Mi") {
			t.Errorf("unit %s: attributes %+v", d.Name, d.Attributes)
		}
	}
	if kinds["socket"] != t3DRASlots || kinds["hugepage"] != t3DRAUnits {
		t.Fatalf("device types %v", kinds)
	}
	x.logf("dra: ResourceSlices publish %d socket and %d hugepage devices on %s", kinds["socket"], kinds["hugepage"], cluster.NodeName)
	x.draNUMA(ctx, t, devs)  // one claim across memifnet.io and a NIC driver (tier3_dra_netconv_test.go)
	x.draNetworkData(ctx, t) // networkData with static addresses (tier3_dra_netconv_test.go)
	x.draAttacks(ctx, t)     // the agent's token, played by a compromised node (tier3_dra_attack_test.go)

	// Two links at once: the example and a second claim whose pods run until stopped.
	x.kubectl(ctx, t, "apply", "-f", "manifests/examples/dra-link.yaml")
	x.kubectlIn(ctx, t, draLinkClaim("dra-second")+"---\n"+
		draPerfPod("dra-second-rx", "dra-second", "east", "--mode=rx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m")+"---\n"+
		draPerfPod("dra-second-tx", "dra-second", "west", "--mode=tx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m"),
		"apply", "-f", "-")
	if err := node.Poll(ctx, 2*time.Minute, "dra-second-rx receiving", func() (bool, error) {
		return x.rxProgress(ctx, "dra-second-rx") > 0, nil
	}); err != nil {
		t.Fatalf("%v; rx logs:\n%s\ntx logs:\n%s", err, x.logs(ctx, "default", "dra-second-rx"), x.logs(ctx, "default", "dra-second-tx"))
	}
	if info := x.containerInfo(ctx, t, "default", "dra-second-rx"); !strings.Contains(info, "memifnet.io/claim=") {
		t.Errorf("dra-second-rx: the container was not created with a memifnet.io/claim CDI device")
	}
	second := x.preparedClaim(ctx, t, "dra-second")
	x.logf("dra: dra-second passes traffic; its claim reports its ports")
	// Read while its pods run: once both are done the claim is deallocated.
	example := x.preparedClaim(ctx, t, "memif-dra-link")
	x.podSucceeded(ctx, t, "default", "memif-dra-tx", 3*time.Minute)
	x.podSucceeded(ctx, t, "default", "memif-dra-rx", 3*time.Minute)
	x.verified(ctx, t, "default", "memif-dra-rx")
	x.logf("dra: examples/dra-link.yaml passed verified traffic next to dra-second")

	// A node agent restart keeps the prepared claim, and the link keeps working.
	if !draCheckpoint(t)[string(second.UID)] {
		t.Fatalf("dra-second (%s) is not prepared in %s: %v", second.UID, t3DRACheckpoint, draCheckpoint(t))
	}
	name, uid, _ := x.agentPod(ctx, t)
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "restart", t3DaemonSet)
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	if name2, uid2, _ := x.agentPod(ctx, t); uid2 == uid {
		t.Fatalf("rollout restart kept pod %s", name)
	} else {
		x.logf("dra: node agent %s replaced by %s", name, name2)
	}
	if !draCheckpoint(t)[string(second.UID)] {
		t.Fatalf("after the restart dra-second is not prepared: %v", draCheckpoint(t))
	}
	from := x.rxProgress(ctx, "dra-second-rx")
	if err := node.Poll(ctx, 60*time.Second, "dra-second traffic after the restart", func() (bool, error) {
		return x.rxProgress(ctx, "dra-second-rx") > from, nil
	}); err != nil {
		t.Fatal(err)
	}
	x.logf("dra: after the restart dra-second is still prepared and its traffic flows")

	// A claim that cannot fit: more socket devices than the node has.
	x.kubectlIn(ctx, t, fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: dra-too-big
spec:
  devices:
    requests:
      - name: many
        exactly: {deviceClassName: socket.memifnet.io, allocationMode: ExactCount, count: %d}
`, t3DRASlots+1)+"---\n"+draPerfPod("dra-too-big", "dra-too-big", "many", "--mode=rx"), "apply", "-f", "-")
	msg := x.unschedulableFor(ctx, t, "dra-too-big", "cannot allocate all claims")
	if c := x.draClaim(ctx, t, "dra-too-big"); c.Status.Allocation != nil {
		t.Errorf("dra-too-big was allocated: %+v", c.Status.Allocation)
	}
	x.logf("dra: dra-too-big (%d sockets) stays Pending: %s", t3DRASlots+1, msg)
	x.kubectl(ctx, t, "delete", "pod", "dra-too-big", "--wait=true")
	x.kubectl(ctx, t, "delete", "resourceclaim", "dra-too-big", "--wait=true")

	// End the second link verified, then delete everything: the claims are unprepared.
	x.stopPerf(ctx, t, "dra-second-tx", "dra-second-rx")
	x.verified(ctx, t, "default", "dra-second-rx")
	var slots []string
	for _, c := range []*resourcev1.ResourceClaim{example, second} {
		for _, r := range c.Status.Allocation.Devices.Results {
			slots = append(slots, r.Device)
		}
	}
	x.kubectl(ctx, t, "delete", "pod", "memif-dra-rx", "memif-dra-tx", "dra-second-rx", "dra-second-tx", "--wait=true", "--timeout=2m")
	x.kubectl(ctx, t, "delete", "resourceclaim", "memif-dra-link", "dra-second", "--wait=true", "--timeout=2m")
	var left []string
	if err := node.Poll(ctx, 60*time.Second, "claims unprepared", func() (bool, error) {
		left = x.draLeftovers(t, slots)
		return len(left) == 0, nil
	}); err != nil {
		t.Fatalf("%v: left behind:\n  %s", err, strings.Join(left, "\n  "))
	}
	x.logf("dra: pods and claims deleted: slots %q scrubbed, no claim in the checkpoint, no CDI spec, no link mount", slots)

	x.draHostPort(ctx, t, devs)
}

// preparedClaim waits until the link claim is allocated (two distinct slots) and the driver has
// reported both ends in its status, and checks what it reports.
func (x *tier3) preparedClaim(ctx context.Context, t *testing.T, name string) *resourcev1.ResourceClaim {
	t.Helper()
	var c *resourcev1.ResourceClaim
	if err := node.Poll(ctx, 2*time.Minute, name+" prepared", func() (bool, error) {
		var err error
		c, err = x.cs.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Status.Allocation != nil && len(c.Status.Devices) == 2, err
	}); err != nil {
		t.Fatalf("%v: status %+v", err, c.Status)
	}
	if r := c.Status.Allocation.Devices.Results; len(r) != 2 || r[0].Device == r[1].Device {
		t.Fatalf("%s allocation: %+v", name, r)
	}
	x.draPorts(t, c)
	return c
}

// macRE is a MAC as Go's net.HardwareAddr prints it.
var macRE = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)

// draPorts checks a prepared link claim's status: one device entry per end, reporting its
// port's name (the request's), role (east serves) and socket in the container, and the standard
// networkData (the port's name as the interface, its MAC).
func (x *tier3) draPorts(t *testing.T, c *resourcev1.ResourceClaim) {
	t.Helper()
	roles := map[string]string{}
	for _, d := range c.Status.Devices {
		if d.Driver != names.DRADriver || d.Data == nil {
			continue
		}
		var p draStatus
		if err := json.Unmarshal(d.Data.Raw, &p); err != nil {
			t.Fatal(err)
		}
		if want := "/run/memifnet/" + d.Device + "/link/memif.sock"; p.Socket != want {
			t.Errorf("claim %s: device %s socket %q, want %q", c.Name, d.Device, p.Socket, want)
		}
		if nd := d.NetworkData; nd == nil || nd.InterfaceName != p.Port || !macRE.MatchString(nd.HardwareAddress) {
			t.Errorf("claim %s: device %s networkData %+v, want interface %q and a MAC", c.Name, d.Device, nd, p.Port)
		}
		roles[p.Port] = p.Role
	}
	if roles["east"] != "server" || roles["west"] != "client" || len(roles) != 2 {
		t.Errorf("claim %s status reports ports %v, want east server and west client", c.Name, roles)
	}
}

// draLeftovers lists what the DRA driver still holds for deleted claims: checkpoint entries, CDI
// specs, link mounts, and anything in the given slots or of their host sides.
func (x *tier3) draLeftovers(t *testing.T, slots []string) []string {
	var left []string
	for uid := range draCheckpoint(t) {
		left = append(left, "checkpoint claim "+uid)
	}
	specs, _ := filepath.Glob("/var/run/cdi/memifnet.io-claim_*.json")
	for _, s := range specs {
		left = append(left, "file "+s)
	}
	mounts, err := testutil.Mounts(t3DRADir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		left = append(left, "mount "+m)
	}
	for _, s := range slots {
		host, _ := filepath.Glob(filepath.Join(t3StateDir, names.StoreSubdir, names.HostPortsSubdir, s+".*"))
		for _, f := range host {
			left = append(left, "file "+f)
		}
		ents, err := os.ReadDir(filepath.Join(t3StateDir, names.SocketsSubdir, s))
		if err != nil {
			left = append(left, fmt.Sprintf("slot %s: %v", s, err))
		}
		for _, e := range ents {
			left = append(left, "slot "+s+": "+e.Name())
		}
	}
	return left
}

// draRestore puts the chained install back (the DaemonSet without the driver) and removes what
// only the DRA overlay made (draPutBack), after the DRA step's pods and claims.
func (x *tier3) draRestore(ctx context.Context, t *testing.T) {
	for _, args := range [][]string{
		{"delete", "pod", "--ignore-not-found", "--wait=true", "--timeout=90s", "memif-dra-rx", "memif-dra-tx", "dra-second-rx", "dra-second-tx", "dra-too-big", "memif-dra-host-port"},
		{"delete", "resourceclaim", "--ignore-not-found", "--wait=true", "--timeout=60s", "memif-dra-link", "dra-second", "dra-too-big"},
		{"delete", "resourceclaimtemplate", "--ignore-not-found", "memif-dra-host-port"},
	} {
		if out, err := x.c.KubectlCmd(ctx, args...).CombinedOutput(); err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	x.draPutBack(ctx, t, t3DaemonSet)
}

// draPutBack applies the chained install over the DRA overlay, waits for daemonSets to roll out
// without the driver, and removes what only the overlay made: its RBAC, admission policies,
// DeviceClasses and the nodes' ResourceSlices.
func (x *tier3) draPutBack(ctx context.Context, t *testing.T, daemonSets ...string) {
	steps := [][]string{{"apply", "-k", "manifests/"}}
	for _, ds := range daemonSets {
		steps = append(steps, []string{"-n", t3Namespace, "rollout", "status", ds, "--timeout=3m"})
	}
	for _, args := range append(steps, [][]string{
		{"delete", "--ignore-not-found", "deviceclass", "socket.memifnet.io", "hugepool.memifnet.io"},
		{"delete", "--ignore-not-found", "clusterrolebinding,clusterrole", "memifnet-dra"},
		{"delete", "--ignore-not-found", "-n", "default", "rolebinding,role", "memifnet-dra-events"},
		{"delete", "--ignore-not-found", "validatingadmissionpolicybinding,validatingadmissionpolicy", "memifnet-dra-resourceslices", "memifnet-dra-claim-status"},
		{"delete", "resourceslices", "--field-selector=spec.driver=" + names.DRADriver},
	}...) {
		if out, err := x.c.KubectlCmd(ctx, args...).CombinedOutput(); err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if sl, err := x.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); err != nil || len(sl.Items) != 0 {
		t.Errorf("ResourceSlices after the DRA step: %v %v", sl, err)
	}
}

// draHostPort: examples/dra-host-port.yaml on the cluster. The pod's claim is made from the
// template (owned by the pod) and allocated one DRA slot and one drapool unit on the same NUMA
// node (the template's matchAttribute); the claim status reports the port, its role (the pod is
// the client) and hostSocket; the container gets the claim's CDI devices and $MEMIFNET_POOLS. The
// host data plane is played on the node by memif-perf, as the examples step does for the chained
// host port, with what the claim status and the slot's port.json say (socket, id, secret, queues,
// sizes): both ends verify every byte, and the pod's memif-perf (the client, which owns the
// shared memory) maps its region from the unit. Deleting the example deletes the claim and
// unprepares it. devs are the node's devices from its ResourceSlices.
func (x *tier3) draHostPort(ctx context.Context, t *testing.T, devs []resourcev1.Device) {
	const pod, podClaim = "memif-dra-host-port", "port"
	start := time.Now()
	x.kubectl(ctx, t, "apply", "-f", "manifests/examples/dra-host-port.yaml")
	var name string
	if err := node.Poll(ctx, time.Minute, pod+" claim from the template", func() (bool, error) {
		p, err := x.cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == podClaim && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
			}
		}
		return name != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	var c *resourcev1.ResourceClaim
	if err := node.Poll(ctx, 2*time.Minute, "claim "+name+" prepared", func() (bool, error) {
		var err error
		c, err = x.cs.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Status.Allocation != nil && len(c.Status.Devices) == 2, err
	}); err != nil {
		t.Fatalf("%v: status %+v", err, c.Status)
	}
	if owner := metav1.GetControllerOf(c); owner == nil || owner.Kind != "Pod" || owner.Name != pod ||
		c.Annotations["resource.kubernetes.io/pod-claim-name"] != podClaim {
		t.Errorf("claim %s: owner %+v, annotations %v; want one made from the template for pod %s", name, owner, c.Annotations, pod)
	}

	// The allocation: a socket slot for vswitch, a unit for mem, on one NUMA node.
	byName := map[string]resourcev1.Device{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	got := map[string]string{} // request -> device
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != names.DRADriver || r.Pool != cluster.NodeName {
			t.Errorf("claim %s: result %+v is not of %s on %s", name, r, names.DRADriver, cluster.NodeName)
		}
		got[r.Request] = r.Device
	}
	slot, unit := got["vswitch"], got["mem"]
	attr := func(dev, key string) string {
		a, ok := byName[dev].Attributes[resourcev1.QualifiedName(key)]
		switch {
		case !ok:
			return ""
		case a.StringValue != nil:
			return *a.StringValue
		case a.IntValue != nil:
			return fmt.Sprint(*a.IntValue)
		}
		return fmt.Sprint(a)
	}
	if len(got) != 2 || attr(slot, "type") != "socket" || attr(unit, "type") != "hugepage" || attr(unit, "pageSize") != "2Mi" {
		t.Fatalf("claim %s allocation %v: want request vswitch a socket slot and mem a 2Mi unit", name, got)
	}
	if n := attr(slot, "numaNode"); n == "" || n != attr(unit, "numaNode") {
		t.Fatalf("claim %s: slot %s on NUMA node %q, unit %s on %q; the template asks for one node", name, slot, n, unit, attr(unit, "numaNode"))
	}

	// The claim status: the port, the pod's role, its socket in the container and on the node.
	var st draStatus
	for _, d := range c.Status.Devices {
		if d.Device == slot && d.Data != nil {
			if err := json.Unmarshal(d.Data.Raw, &st); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := draStatus{Port: "vswitch", Role: "client", Socket: names.ContainerDir + "/" + slot + "/" + names.SocketFile,
		HostSocket: filepath.Join(t3StateDir, names.SocketsSubdir, slot, names.SocketFile)}
	if st != want {
		t.Fatalf("claim %s status of %s: %+v, want %+v", name, slot, st, want)
	}
	info := x.containerInfo(ctx, t, "default", pod)
	for _, s := range []string{"memifnet.io/claim=" + string(c.UID) + "-" + slot, "memifnet.io/claim=" + string(c.UID) + "-" + unit,
		names.EnvPools + "=" + names.ContainerPoolsDir + "/" + unit} {
		if !strings.Contains(info, s) {
			t.Errorf("%s: the container was not created with %s", pod, s)
		}
	}
	x.logf("dra: %s got claim %s: slot %s and unit %s on NUMA node %s; status %+v",
		pod, name, slot, unit, attr(slot, "numaNode"), st)

	// The host data plane, from the host side's files the agent wrote (the pod's end checked in
	// its port.json).
	b, err := os.ReadFile(filepath.Join(filepath.Dir(st.HostSocket), names.PortFile))
	if err != nil {
		t.Fatal(err)
	}
	var spec portspec.PortSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("port.json of %s: %v\n%s", slot, err, b)
	}
	if spec.Name != "vswitch" || spec.Role != "client" || spec.Queues != 2 || spec.Mode != portspec.ModeEthernet {
		t.Fatalf("port.json of %s: %s; want port vswitch, client, 2 queues (the template's), ethernet", slot, b)
	}
	// The host side, from the agent's own files (state/host-ports/<slot>.*), as for a
	// device-plugin host port: always the server in copy mode, the node's socket path, the pod it
	// serves.
	hp := draHostSide(t, slot)
	if hp["MEMIF_ROLE"] != "server" || hp["MEMIF_ZERO_COPY"] != "false" || hp["MEMIF_SOCKET"] != st.HostSocket || hp["MEMIF_POD"] != "default/"+pod ||
		hp["MEMIF_ID"] != fmt.Sprint(spec.ID) || hp["MEMIF_QUEUES"] != "2" || hp["MEMIF_DPDK_DEVICE"] == "" || hp["MEMIF_VPP_INTERFACE"] == "" {
		t.Fatalf("host side of %s: %v; want the server on %s for pod default/%s, id %d, 2 queues, with DPDK and VPP files", slot, hp, st.HostSocket, pod, spec.ID)
	}
	// The description, found as a data plane finds a device-plugin host port's (by pod, in
	// host-ports/*.json), says the same, and names the claim as its owner.
	d := hostPort(ctx, t, pod)
	secret, _ := d["secret"].(string)
	owner, _ := d["owner"].(map[string]any)
	num := func(v any) string { f, _ := v.(float64); return strconv.FormatFloat(f, 'f', -1, 64) }
	if d["socket"] != st.HostSocket || d["role"] != "server" || d["port"] != "vswitch" || num(d["id"]) != hp["MEMIF_ID"] ||
		num(d["queues"]) != "2" || secret != hp["MEMIF_SECRET"] || owner["claimUID"] != string(c.UID) {
		t.Fatalf("description of DRA host port %s: %v; want what %s.env says: %v", slot, d, slot, hp)
	}
	args := []string{"--role", hp["MEMIF_ROLE"], "--socket", hp["MEMIF_SOCKET"], "--id", hp["MEMIF_ID"], "--queues", hp["MEMIF_QUEUES"],
		"--ring-size", hp["MEMIF_RING_SIZE"], "--buffer-size", hp["MEMIF_BUFFER_SIZE"],
		"--mode", "txrx", "--verify", "--size", "1500", "--duration", "10s", "--connect-timeout", "2m"}
	if hp["MEMIF_SECRET"] != "" {
		args = append(args, "--secret", hp["MEMIF_SECRET"])
	}
	var out bytes.Buffer
	perf := x.hostPerf(ctx, args...)
	perf.Stdout, perf.Stderr = &out, &out
	if err := perf.Start(); err != nil {
		t.Fatal(err)
	}
	// The pod's memif-perf is the client: it maps the region from its pool unit once it
	// connects, and holds it while the link is up (its run lasts 20 s, the host's 10 s).
	pid := x.containerPID(ctx, t, "default", pod)
	maps := fmt.Sprintf("/proc/%d/maps", pid)
	var mapped string
	mapErr := node.Poll(ctx, 30*time.Second, pod+" maps "+unit, func() (bool, error) {
		b, err := os.ReadFile(maps)
		if err != nil {
			return false, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(l, "/"+unit) {
				mapped = l
				return true, nil
			}
		}
		return false, nil
	})
	err = perf.Wait()
	sum, ok := node.Summary(out.String())
	if err != nil || !ok || sum["verify_errors"] != 0 || sum["rx_pkts"] == 0 || !strings.Contains(out.String(), "corrupt=0 lost=0 late=0") {
		t.Fatalf("host data plane (memif-perf %s): %v\n%s\npod logs:\n%s", strings.Join(args, " "), err, out.String(), x.logs(ctx, "default", pod))
	}
	x.logf("dra: host data plane on %s: %s", st.HostSocket, summaryLine(out.String()))
	if mapErr != nil {
		t.Fatalf("%v: the client did not map its region from the pool unit", mapErr)
	}
	x.logf("dra: %s (pid %d) maps its region from the unit: %s", pod, pid, strings.Join(strings.Fields(mapped), " "))
	x.podSucceeded(ctx, t, "default", pod, 2*time.Minute)
	x.verified(ctx, t, "default", pod)

	// Deleting the example deletes the generated claim, and the driver unprepares it.
	x.kubectl(ctx, t, "delete", "-f", "manifests/examples/dra-host-port.yaml", "--wait=true", "--timeout=2m")
	var left []string
	if err := node.Poll(ctx, 60*time.Second, "claim "+name+" deleted and unprepared", func() (bool, error) {
		_, err := x.cs.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		left = x.draLeftovers(t, []string{slot})
		if err == nil {
			left = append(left, "claim "+name)
		}
		return len(left) == 0, nil
	}); err != nil {
		t.Fatalf("%v: left behind:\n  %s", err, strings.Join(left, "\n  "))
	}
	x.logf("dra: examples/dra-host-port.yaml deleted: claim %s gone, slot %s scrubbed, nothing prepared (%.1f s)", name, slot, time.Since(start).Seconds())
}

// draHostSide reads the host side's files of a DRA host port: <slot>.env as KEY=value (values
// bare or in single quotes, as peerconf writes them), after checking that its dpdk.args and
// vpp.cli are there too, mode 0600 as the secret needs.
func draHostSide(t *testing.T, slot string) map[string]string {
	t.Helper()
	base := filepath.Join(t3StateDir, names.StoreSubdir, names.HostPortsSubdir, slot)
	for _, f := range []string{base + "." + names.DPDKArgsFile, base + "." + names.VPPFile, base + names.HostEnvSuffix} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("host side of DRA host port %s: %v", slot, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	b, err := os.ReadFile(base + names.HostEnvSuffix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
		}
		out[k] = v
	}
	return out
}
