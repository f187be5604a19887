package dra

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/internal/linkdir"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/cdi"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/slots"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/internal/tmpfs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

const testNode = "node-a"

// fakeUnits is a pool of plain files: Scrub replaces the file (a new inode), as the hugetlbfs
// pool does, without needing hugepages.
type fakeUnits struct {
	dir    string
	ids    []string
	scrubs map[string]int
}

func (f *fakeUnits) Units() []device.Unit {
	var out []device.Unit
	for _, id := range f.ids {
		out = append(out, device.Unit{ID: id, Node: 0})
	}
	return out
}
func (f *fakeUnits) Path(id string) string      { return filepath.Join(f.dir, id) }
func (f *fakeUnits) Withheld() map[string]error { return nil }
func (f *fakeUnits) Scrub(id string) error {
	f.scrubs[id]++
	_ = os.Remove(f.Path(id))
	return os.WriteFile(f.Path(id), nil, 0o666)
}

type env struct {
	state, cdiDir string
	slots         *slots.Provider
	units         *fakeUnits
	pool          Units // the driver's pool: units, or a real one
	devinfo       devinfo.Writer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testutil.RequireRoot(t, "slots and links are tmpfs mounts")
	state := t.TempDir()
	t.Cleanup(func() { testutil.UnmountUnder(t, state) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dw := devinfo.Writer{Dir: t.TempDir()}
	sp, err := slots.NewPrefixed(state, names.DRASlotPrefix, 4, []int{0}, tmpfs.Limits{Size: 1 << 20, Inodes: 64}, dw, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	u := &fakeUnits{dir: t.TempDir(), ids: []string{"drapool-n0-000", "drapool-n0-001"}, scrubs: map[string]int{}}
	for _, id := range u.ids {
		if err := os.WriteFile(u.Path(id), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return &env{state: state, cdiDir: t.TempDir(), slots: sp, units: u, pool: u, devinfo: dw}
}

func (e *env) deviceState(t *testing.T) *DeviceState {
	t.Helper()
	d, err := NewDeviceState(Options{
		DriverName: names.DRADriver, NodeName: testNode, StateDir: e.state,
		SlotsDir: filepath.Join(e.state, names.SocketsSubdir), Slots: e.slots, SlotBytes: 1 << 20,
		Pools:      []Pool{{Name: "drapool", PageSize: "2Mi", UnitSize: 64 << 20, Units: e.pool}},
		LinkLimits: linkdir.DefaultLimits,
		CDI:        cdi.Writer{Dir: e.cdiDir}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type alloc struct{ request, device string }

// claim is an allocated claim with the requests of allocs (in order) and opaque configs.
func claim(uid, name string, allocs []alloc, cfgs ...resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name, UID: types.UID(uid)}}
	seen := map[string]bool{}
	res := &resourceapi.AllocationResult{}
	for _, a := range allocs {
		if !seen[a.request] {
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: a.request})
			seen[a.request] = true
		}
		res.Devices.Results = append(res.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: a.request, Driver: names.DRADriver, Pool: testNode, Device: a.device})
	}
	res.Devices.Config = cfgs
	c.Status.Allocation = res
	return c
}

func opaque(json string, requests ...string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: names.DRADriver, Parameters: runtime.RawExtension{Raw: []byte(json)}}},
	}
}

var linkAllocs = []alloc{{"east", "dra-slot-000"}, {"west", "dra-slot-001"}}

func readSpec(t *testing.T, e *env, slot string) portspec.PortSpec {
	t.Helper()
	s, err := portspec.Read(filepath.Join(e.slots.Dir(slot), names.PortFile))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func slotIdentity(t *testing.T, e *env, slot string) safefs.Identity {
	t.Helper()
	d, err := safefs.Open(e.slots.Dir(slot))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	id, err := d.Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A shared link claim: Prepare scrubs both slots, mounts one link directory in both, writes
// each end's port.json (roles by request order, one secret) and a CDI spec; the two slots see
// the same link directory.
func TestPrepareLink(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	// A previous tenant's leftovers in the slot must not survive the hand-out.
	if err := os.WriteFile(filepath.Join(e.slots.Dir("dra-slot-000"), "planted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := slotIdentity(t, e, "dra-slot-000")
	c := claim("uid-1", "chain-1", linkAllocs, opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","mode":"ip","queues":2}`))
	res, err := d.Prepare(c)
	if err != nil {
		t.Fatal(err)
	}
	if after := slotIdentity(t, e, "dra-slot-000"); after == before {
		t.Error("Prepare did not give the slot a fresh tmpfs")
	}
	if _, err := os.Stat(filepath.Join(e.slots.Dir("dra-slot-000"), "planted")); !os.IsNotExist(err) {
		t.Errorf("the previous tenant's file survived Prepare: %v", err)
	}
	east, west := readSpec(t, e, "dra-slot-000"), readSpec(t, e, "dra-slot-001")
	if east.Name != "east" || east.Role != "server" || west.Name != "west" || west.Role != "client" {
		t.Errorf("ports: east %s/%s, west %s/%s; want east server, west client", east.Name, east.Role, west.Name, west.Role)
	}
	if east.Link != "chain-1" || east.Mode != "ip" || east.Queues != 2 || west.Queues != 2 {
		t.Errorf("east port.json does not carry the config: %+v", east)
	}
	if east.Secret == "" || east.Secret != west.Secret {
		t.Errorf("secrets %q and %q: want one shared secret", east.Secret, west.Secret)
	}
	if want := "/run/memifnet/dra-slot-000/link/memif.sock"; east.Socket != want {
		t.Errorf("east socket %q, want %q", east.Socket, want)
	}
	// The ready configs beside port.json (internal/peerconf): an ip link gets VPP's, not DPDK's.
	if b, err := os.ReadFile(filepath.Join(e.slots.Dir("dra-slot-001"), names.VPPFile)); err != nil || !strings.Contains(string(b), "socket-id 20001 ring-size 1024 buffer-size 2048 slave rx-queues 2 tx-queues 2 mode ip secret "+west.Secret) {
		t.Errorf("west's %s: %q %v", names.VPPFile, b, err)
	}
	if _, err := os.Stat(filepath.Join(e.slots.Dir("dra-slot-000"), names.DPDKArgsFile)); !os.IsNotExist(err) {
		t.Errorf("an ip port got a %s: %v", names.DPDKArgsFile, err)
	}
	// One link directory, seen by both slots.
	if err := os.WriteFile(filepath.Join(e.slots.Dir("dra-slot-000"), "link", "probe"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(e.slots.Dir("dra-slot-001"), "link", "probe")); err != nil || string(b) != "hi" {
		t.Errorf("west's slot does not see east's link directory: %q %v", b, err)
	}
	if got := res.CDI["dra-slot-001"]; !slices.Equal(got, []string{"memifnet.io/claim=uid-1-dra-slot-001"}) {
		t.Errorf("CDI IDs of west: %q", got)
	}
	var spec cdi.Spec
	b, err := os.ReadFile(filepath.Join(e.cdiDir, "memifnet.io-claim_uid-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != CDIKind || len(spec.Devices) != 2 || spec.Devices[0].Name != "uid-1-dra-slot-000" {
		t.Fatalf("CDI spec: %s", b)
	}
	m := spec.Devices[1].ContainerEdits.Mounts
	if len(m) != 1 || m[0].HostPath != e.slots.Dir("dra-slot-001") || m[0].ContainerPath != "/run/memifnet/dra-slot-001" || !slices.Contains(m[0].Options, "rbind") {
		t.Errorf("CDI mounts of west: %+v", m)
	}
	if env := spec.Devices[1].ContainerEdits.Env; !slices.Equal(env, []string{"MEMIFNET_SOCKETS=dra-slot-001"}) {
		t.Errorf("CDI env of west: %q", env)
	}

	// Prepare again (the kubelet retries, or restarted): the same result, nothing scrubbed.
	id := slotIdentity(t, e, "dra-slot-000")
	res2, err := d.Prepare(c)
	if err != nil {
		t.Fatal(err)
	}
	if slotIdentity(t, e, "dra-slot-000") != id || res2.CDI["dra-slot-000"][0] != res.CDI["dra-slot-000"][0] {
		t.Error("a repeated Prepare changed the prepared claim")
	}
	if _, err := os.Stat(filepath.Join(e.slots.Dir("dra-slot-001"), "link", "probe")); err != nil {
		t.Errorf("a repeated Prepare lost the link's contents: %v", err)
	}
}

// A node agent restart keeps prepared claims (the checkpoint); Unprepare after it scrubs both
// slots, unmounts the link and removes the CDI spec. A second Unprepare finds nothing to do.
// A pod that kept a descriptor of its slot reaches only the old tmpfs.
func TestUnprepareAfterRestart(t *testing.T) {
	e := newEnv(t)
	c := claim("uid-2", "l2", linkAllocs)
	if _, err := e.deviceState(t).Prepare(c); err != nil {
		t.Fatal(err)
	}
	kept, err := os.Open(e.slots.Dir("dra-slot-000"))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()

	// The restarted node agent runs in a new container: the link's tmpfs has another mount id
	// in its mount namespace. Play that by changing the recorded id.
	ck := checkpoint{path: filepath.Join(e.state, names.DRASubdir, "claims.json")}
	claims, err := ck.load()
	if err != nil {
		t.Fatal(err)
	}
	c2 := claims["uid-2"]
	c2.LinkMount.Mount++
	claims["uid-2"] = c2
	if err := ck.save(claims); err != nil {
		t.Fatal(err)
	}
	d := e.deviceState(t) // the restarted node agent
	if p := d.Prepared(); len(p) != 1 || p[0].UID != "uid-2" || !p[0].Prepared || p[0].LinkMount.IsZero() {
		t.Fatalf("after restart the driver holds %+v, want claim uid-2 prepared with its link", p)
	}
	// The kubelet asks again after its own restart: same devices, no scrub.
	if _, err := d.Prepare(c); err != nil {
		t.Fatal(err)
	}
	if err := d.Unprepare("uid-2"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"dra-slot-000", "dra-slot-001"} {
		ents, err := os.ReadDir(e.slots.Dir(s))
		if err != nil || len(ents) != 0 {
			t.Errorf("slot %s after Unprepare: %v %v; want a fresh, empty tmpfs", s, ents, err)
		}
	}
	if mounts := testutil.MountsUnder(t, filepath.Join(e.state, names.DRASubdir)); len(mounts) != 0 {
		t.Errorf("link mounts left after Unprepare: %q", mounts)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, "memifnet.io-claim_uid-2.json")); !os.IsNotExist(err) {
		t.Errorf("CDI spec left after Unprepare: %v", err)
	}
	// The old tenant writes through its kept descriptor: the new slot does not see it.
	fd, err := unix.Openat(int(kept.Fd()), "after", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err == nil {
		unix.Close(fd)
	}
	if _, err := os.Stat(filepath.Join(e.slots.Dir("dra-slot-000"), "after")); !os.IsNotExist(err) {
		t.Errorf("a kept descriptor of the old slot reaches the new one: %v", err)
	}
	if err := d.Unprepare("uid-2"); err != nil {
		t.Errorf("second Unprepare: %v", err)
	}
	if p := e.deviceState(t).Prepared(); len(p) != 0 {
		t.Errorf("checkpoint after Unprepare: %+v", p)
	}
}

// Bad parameters are refused before any side effect, naming the request and field.
func TestPrepareBadParameters(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	for _, tc := range []struct {
		name string
		c    *resourceapi.ResourceClaim
		want string
	}{
		{"unknown field", claim("u1", "l", linkAllocs, opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","queus":2}`)), `unknown field "queus"`},
		{"wrong kind", claim("u2", "l", linkAllocs, opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"Port"}`)), `field "kind": "Port", want "PortConfig"`},
		{"wrong type", claim("u3", "l", linkAllocs, opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","queues":"2"}`)), `field "queues": got a JSON string`},
		{"bad ring", claim("u4", "l", linkAllocs, opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","ringSize":1000}`, "west")), `request west: field "ringSize": 1000 must be a power of two`},
		{"same role", claim("u5", "l", linkAllocs, opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","role":"server"}`)), `field "role": both are server`},
		{"long name", claim("u6", "l", []alloc{{"a-very-long-request-name", "dra-slot-000"}}), `field "name": "a-very-long-request-name" must be 1-15 characters`},
		{"link on host port", claim("u7", "l", []alloc{{"east", "dra-slot-000"}}, opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","link":"x"}`)), `request east: field "link"`},
		{"foreign device", claim("u8", "l", []alloc{{"east", "slot-000"}}), `"slot-000" (request east) is not a device`},
		{"three sockets", claim("u9", "l", []alloc{{"a", "dra-slot-000"}, {"b", "dra-slot-001"}, {"c", "dra-slot-002"}}), "3 socket devices on one claim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Prepare(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "claim ns1/l") {
				t.Fatalf("err = %v, want one naming the claim and containing %q", err, tc.want)
			}
			if p := d.Prepared(); len(p) != 0 {
				t.Errorf("a refused claim left a record: %+v", p)
			}
			if ents, _ := os.ReadDir(e.cdiDir); len(ents) != 0 {
				t.Errorf("a refused claim left a CDI spec: %v", ents)
			}
		})
	}
}

// A device held by a prepared claim is not handed to another claim (the driver is the last line
// of defence against a double allocation).
func TestPrepareRefusesDeviceOfAnotherClaim(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	if _, err := d.Prepare(claim("a", "first", []alloc{{"p", "dra-slot-002"}})); err != nil {
		t.Fatal(err)
	}
	_, err := d.Prepare(claim("b", "second", []alloc{{"p", "dra-slot-002"}}))
	if err == nil || !strings.Contains(err.Error(), "held by claim ns1/first") {
		t.Fatalf("err = %v, want a refusal naming the holder", err)
	}
}

// A per-pod claim (from a ResourceClaimTemplate): one host port and one hugepage unit. The unit
// is scrubbed at Prepare and Unprepare and reaches the container by a bind mount and
// MEMIFNET_POOLS; the host port's socket is in the slot itself.
func TestPrepareHostPortAndUnit(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	c := claim("uid-h", "per-pod", []alloc{{"port", "dra-slot-003"}, {"mem", "drapool-n0-001"}})
	if _, err := d.Prepare(c); err != nil {
		t.Fatal(err)
	}
	s := readSpec(t, e, "dra-slot-003")
	if s.Name != "port" || s.Role != "client" || s.Peer != portspec.PeerHost || s.Socket != "/run/memifnet/dra-slot-003/memif.sock" {
		t.Errorf("host port spec: %+v", s)
	}
	if p := d.Prepared()[0].Devices[0].Status; p.HostSocket != e.slots.Dir("dra-slot-003")+"/memif.sock" {
		t.Errorf("host port status: host socket %q", p.HostSocket)
	}
	if e.units.scrubs["drapool-n0-001"] != 1 {
		t.Errorf("unit scrubbed %d times at Prepare, want 1", e.units.scrubs["drapool-n0-001"])
	}
	b, _ := os.ReadFile(filepath.Join(e.cdiDir, "memifnet.io-claim_uid-h.json"))
	if !strings.Contains(string(b), `"MEMIFNET_POOLS=/run/memifnet/pools/drapool-n0-001"`) || !strings.Contains(string(b), e.units.Path("drapool-n0-001")) {
		t.Errorf("CDI spec lacks the unit's mount or env:\n%s", b)
	}
	if err := d.Unprepare("uid-h"); err != nil {
		t.Fatal(err)
	}
	if e.units.scrubs["drapool-n0-001"] != 2 {
		t.Errorf("unit scrubbed %d times after Unprepare, want 2", e.units.scrubs["drapool-n0-001"])
	}
}

// The ResourceSlices: one pool named after the node, socket and hugepage devices with their
// attributes and capacity.
func TestResources(t *testing.T) {
	e := newEnv(t)
	r := e.deviceState(t).Resources()
	pool, ok := r.Pools[testNode]
	if !ok || len(pool.Slices) != 1 {
		t.Fatalf("pools: %+v", r.Pools)
	}
	devs := pool.Slices[0].Devices
	if len(devs) != 6 || devs[0].Name != "dra-slot-000" || devs[5].Name != "drapool-n0-001" {
		t.Fatalf("devices: %+v", devs)
	}
	u := devs[5]
	unitCap, slotCap := u.Capacity[CapSize].Value, devs[0].Capacity[CapSize].Value
	if *u.Attributes[AttrType].StringValue != KindHugepage || *u.Attributes[AttrPool].StringValue != "drapool" ||
		*u.Attributes[AttrPageSize].StringValue != "2Mi" || *u.Attributes[AttrNUMANode].IntValue != 0 || unitCap.String() != "64Mi" {
		t.Errorf("unit device: %+v", u)
	}
	if *devs[0].Attributes[AttrType].StringValue != KindSocket || slotCap.String() != "1Mi" {
		t.Errorf("slot device: %+v", devs[0])
	}
}

// Through the kubelet plugin interface, with a fake API client: the result names each request's
// CDI device, and the claim's status reports each port (name, role, socket).
func TestPluginPrepareReportsStatus(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	c := claim("uid-s", "chain", linkAllocs)
	client := fake.NewClientset(c)
	p := &Driver{state: d, client: client, log: d.opts.Log}
	res, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if err != nil || res["uid-s"].Err != nil {
		t.Fatalf("prepare: %v %v", err, res["uid-s"].Err)
	}
	devs := res["uid-s"].Devices
	if len(devs) != 2 || !slices.Equal(devs[0].Requests, []string{"east"}) || devs[0].PoolName != testNode ||
		!slices.Equal(devs[1].CDIDeviceIDs, []string{"memifnet.io/claim=uid-s-dra-slot-001"}) {
		t.Errorf("devices: %+v", devs)
	}
	got, err := client.ResourceV1().ResourceClaims("ns1").Get(context.Background(), "chain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Devices) != 2 {
		t.Fatalf("status devices: %+v", got.Status.Devices)
	}
	var sd PortStatus
	if err := json.Unmarshal(got.Status.Devices[1].Data.Raw, &sd); err != nil {
		t.Fatal(err)
	}
	if sd.Port != "west" || sd.Role != "client" || sd.Socket != "/run/memifnet/dra-slot-001/link/memif.sock" || got.Status.Devices[1].Device != "dra-slot-001" {
		t.Errorf("status of west: %+v (device %s)", sd, got.Status.Devices[1].Device)
	}
	un, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-s"}, {UID: "never-prepared"}})
	if err != nil || un["uid-s"] != nil || un["never-prepared"] != nil {
		t.Errorf("unprepare: %v %v", err, un)
	}
}

// The node agent died in the middle of Prepare (the checkpoint says not prepared): the kubelet's
// next Prepare undoes the half-done work (the old link mount goes, the slots are scrubbed again)
// and prepares the claim anew.
func TestPrepareAfterCrashMidway(t *testing.T) {
	for _, withLink := range []bool{false, true} {
		t.Run(fmt.Sprintf("unrecorded link then unprepare %v", withLink), func(t *testing.T) { crashMidway(t, withLink) })
	}
}

func crashMidway(t *testing.T, withLink bool) {
	e := newEnv(t)
	c := claim("uid-c", "crashed", linkAllocs)
	if _, err := e.deviceState(t).Prepare(c); err != nil {
		t.Fatal(err)
	}
	ck := checkpoint{path: filepath.Join(e.state, names.DRASubdir, "claims.json")}
	claims, err := ck.load()
	if err != nil {
		t.Fatal(err)
	}
	half := claims["uid-c"]
	half.Prepared = false
	if withLink {
		half.LinkMount = safefs.Identity{} // died between mounting the link and recording it
	}
	claims["uid-c"] = half
	if err := ck.save(claims); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.slots.Dir("dra-slot-001"), "leftover"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := e.deviceState(t)
	if withLink {
		// The pod went before the kubelet asked again: Unprepare finds the unrecorded link
		// mount under the claim's name and takes it away.
		if err := d.Unprepare("uid-c"); err != nil {
			t.Fatal(err)
		}
		if mounts := testutil.MountsUnder(t, filepath.Join(e.state, names.DRASubdir)); len(mounts) != 0 {
			t.Errorf("link mounts after Unprepare: %q", mounts)
		}
		return
	}
	if _, err := d.Prepare(c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.slots.Dir("dra-slot-001"), "leftover")); !os.IsNotExist(err) {
		t.Errorf("the half-prepared claim's slot was not scrubbed: %v", err)
	}
	p := d.Prepared()
	if len(p) != 1 || !p[0].Prepared || p[0].LinkMount.IsZero() || p[0].LinkMount == half.LinkMount {
		t.Errorf("after the second Prepare: %+v; want the claim prepared with a new link", p)
	}
	if mounts := testutil.MountsUnder(t, filepath.Join(e.state, names.DRASubdir)); len(mounts) != 1 {
		t.Errorf("link mounts %q, want only the new one", mounts)
	}
	if s := readSpec(t, e, "dra-slot-001"); s.Role != "client" || s.Name != "west" {
		t.Errorf("west after the second Prepare: %+v", s)
	}
}

// A checkpoint written before the one status type (the port's name under "name") still loads.
func TestCheckpointBeforeOneStatusType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "claims.json")
	old := `{"version":1,"claims":[{"uid":"u","namespace":"ns1","name":"l","prepared":true,"devices":[
		{"request":"east","pool":"node-a","name":"dra-slot-000","kind":"socket",
		 "port":{"name":"east","role":"server","socket":"/run/memifnet/dra-slot-000/link/memif.sock","link":"l"}}]}]}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	claims, err := checkpoint{path: path}.load()
	if err != nil {
		t.Fatal(err)
	}
	want := PortStatus{Port: "east", Role: "server", Socket: "/run/memifnet/dra-slot-000/link/memif.sock", Link: "l"}
	if st := claims["u"].Devices[0].Status; st == nil || *st != want {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	b, err := json.Marshal(want)
	if err != nil || string(b) != `{"port":"east","role":"server","socket":"/run/memifnet/dra-slot-000/link/memif.sock","link":"l"}` {
		t.Errorf("status data %s %v", b, err)
	}
}
