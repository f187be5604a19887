package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// The DRA network drivers' conventions (DRANET, the SR-IOV DRA driver): each port's status entry
// carries the standard networkData (KEP-4817) besides the driver's data: the port's name as the
// interface name and its MAC, as port.json has them; an ip-mode port has no MAC, and the
// addresses its PortConfig gives it (no IPAM under DRA), in port.json and vpp.cli too.
func TestStatusNetworkData(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	eth := claim("uid-n", "chain", linkAllocs)
	ip := claim("uid-i", "routed", []alloc{{"east", "dra-slot-002"}, {"west", "dra-slot-003"}},
		opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","mode":"ip"}`),
		opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","mode":"ip","ips":["192.0.2.1/24","2001:db8::1/64"]}`, "east"),
		opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","mode":"ip","ips":["192.0.2.2/24"]}`, "west"))
	wantIPs := map[string][]string{"dra-slot-002": {"192.0.2.1/24", "2001:db8::1/64"}, "dra-slot-003": {"192.0.2.2/24"}}
	client := fake.NewClientset(eth, ip)
	p := &Driver{state: d, client: client, log: d.opts.Log}
	res, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{eth, ip})
	if err != nil || res["uid-n"].Err != nil || res["uid-i"].Err != nil {
		t.Fatalf("prepare: %v %+v", err, res)
	}
	for _, c := range []*resourceapi.ResourceClaim{eth, ip} {
		got, err := client.ResourceV1().ResourceClaims("ns1").Get(context.Background(), c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Devices) != 2 {
			t.Fatalf("claim %s: status devices %+v", c.Name, got.Status.Devices)
		}
		for _, st := range got.Status.Devices {
			spec := readSpec(t, e, st.Device)
			nd := st.NetworkData
			if nd == nil || nd.InterfaceName != spec.Name || nd.HardwareAddress != spec.MAC || !slices.Equal(nd.IPs, wantIPs[st.Device]) ||
				!slices.Equal(spec.IPs, wantIPs[st.Device]) || st.Data == nil {
				t.Errorf("claim %s device %s: networkData %+v, data %v, port.json IPs %v; want interface %q, MAC %q (port.json), IPs %v in both, and the driver's data",
					c.Name, st.Device, nd, st.Data, spec.IPs, spec.Name, spec.MAC, wantIPs[st.Device])
			}
			if (spec.Mode == portspec.ModeEthernet) != (spec.MAC != "") {
				t.Errorf("claim %s device %s: mode %s with MAC %q", c.Name, st.Device, spec.Mode, spec.MAC)
			}
		}
	}
	if cli, _ := os.ReadFile(filepath.Join(e.slots.Dir("dra-slot-002"), names.VPPFile)); !strings.Contains(string(cli), " 2001:db8::1/64\n") {
		t.Errorf("vpp.cli of an ip port lacks its address:\n%s", cli)
	}
	// The checkpoint keeps it: a repeated Prepare (after a kubelet restart) reports the same.
	d2 := e.deviceState(t)
	for _, c := range d2.Prepared() {
		for _, dev := range c.Devices {
			if dev.Network == nil || dev.Network.InterfaceName != dev.Status.Port {
				t.Errorf("checkpoint of %s device %s: network data %+v", c.Name, dev.Name, dev.Network)
			}
		}
	}
}

// Every device is published with its NUMA node also as dra.net/numaNode (an int, the name and
// type DRANET and the SR-IOV DRA driver use), equal to memifnet.io's numaNode.
func TestResourcesNetNUMANode(t *testing.T) {
	e := newEnv(t)
	devs := e.deviceState(t).Resources().Pools[testNode].Slices[0].Devices
	if len(devs) != 6 {
		t.Fatalf("devices: %+v", devs)
	}
	for _, dev := range devs {
		a, b := dev.Attributes[AttrNetNUMANode].IntValue, dev.Attributes[AttrNUMANode].IntValue
		if a == nil || b == nil || *a != *b {
			t.Errorf("device %s: dra.net/numaNode %v, numaNode %v", dev.Name, a, b)
		}
	}
	if AttrNetNUMANode != "dra.net/numaNode" {
		t.Errorf("attribute %q", AttrNetNUMANode)
	}
}

// hostFiles are the host side's files of a DRA host port, as memif-cni names them.
func hostFiles(e *env, slot string) map[string]string {
	dir := filepath.Join(e.state, names.StoreSubdir, names.HostPortsSubdir)
	return map[string]string{
		"dpdk.args": filepath.Join(dir, slot+"."+names.DPDKArgsFile), "dpdk.app-args": filepath.Join(dir, slot+"."+names.DPDKAppArgsFile),
		"vpp.cli": filepath.Join(dir, slot+"."+names.VPPFile), "env": filepath.Join(dir, slot+names.HostEnvSuffix),
		"json": filepath.Join(dir, slot+".json"),
	}
}

// A DRA host port gets the host side's description and ready configs beside the device plugin's
// host ports, from the same writer: the opposite role, the socket as the node sees it, the pod
// the claim is reserved for; mode 0600, not in the pod's slot. Unprepare removes them; a link
// writes none.
func TestHostPortHostSide(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	c := claim("uid-h", "per-pod", []alloc{{"vswitch", "dra-slot-003"}, {"mem", "drapool-n0-001"}},
		opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","queues":2,"zeroCopy":true}`))
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "nf-0", UID: "pod-uid"}}
	if _, err := d.Prepare(c); err != nil {
		t.Fatal(err)
	}
	hostSocket := e.slots.Dir("dra-slot-003") + "/" + names.SocketFile
	side, err := peerconf.HostSide(readSpec(t, e, "dra-slot-003"), peerconf.Host{Socket: hostSocket, Slot: "dra-slot-003", Pod: "ns1/nf-0"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := peerconf.Generate(side)
	if err != nil {
		t.Fatal(err)
	}
	files := hostFiles(e, "dra-slot-003")
	for name, content := range map[string]string{"dpdk.args": want.DPDKArgs, "dpdk.app-args": want.DPDKAppArgs, "vpp.cli": want.VPPCLI, "env": want.Env} {
		b, err := os.ReadFile(files[name])
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(files[name])
		if string(b) != content || content == "" || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s (mode %v):\n%s\nwant (0600):\n%s", files[name], fi.Mode().Perm(), b, content)
		}
	}
	var desc peerconf.HostPort
	if err := json.Unmarshal([]byte(mustReadFile(t, files["json"])), &desc); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(files["json"]); fi.Mode().Perm() != 0o600 || desc.Role != "server" || desc.Socket != hostSocket ||
		desc.Namespace != "ns1" || desc.Pod != "nf-0" || desc.Port != "vswitch" || desc.Queues != 2 || desc.Owner != (peerconf.Owner{ClaimUID: "uid-h"}) {
		t.Errorf("%s (mode %v): %+v; want the server on %s for ns1/nf-0 port vswitch, 2 queues, 0600", files["json"], fi.Mode().Perm(), desc, hostSocket)
	}
	env, _ := os.ReadFile(files["env"])
	// The pod's end is a zero-copy client; the node's end serves and copies.
	for _, line := range []string{"MEMIF_ROLE=server", "MEMIF_ZERO_COPY=false", "MEMIF_SOCKET=" + hostSocket, "MEMIF_POD=ns1/nf-0", "MEMIF_QUEUES=2"} {
		if !strings.Contains(string(env), "\n"+line+"\n") {
			t.Errorf("%s lacks %s:\n%s", files["env"], line, env)
		}
	}
	if err := d.Unprepare("uid-h"); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Unprepare: %v", f, err)
		}
	}
	if _, err := d.Prepare(claim("uid-l", "chain", linkAllocs)); err != nil {
		t.Fatal(err)
	}
	for _, slot := range []string{"dra-slot-000", "dra-slot-001"} {
		if _, err := os.Stat(hostFiles(e, slot)["env"]); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("link end %s got a host side: %v", slot, err)
		}
	}
}

// A claim never chooses the node's side of its host port (docs/security.md row 32): a PortConfig
// with "role": "server" (and "zeroCopy", which made the node's side a zero-copy client handing
// the node data plane's memory to the pod) is refused naming the request and the field, before
// the first side effect: no record, no CDI spec, no host side, the slot not even scrubbed.
func TestPrepareRefusesServingHostPort(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	planted := filepath.Join(e.slots.Dir("dra-slot-003"), "planted")
	if err := os.WriteFile(planted, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := claim("uid-s", "per-pod", []alloc{{"vswitch", "dra-slot-003"}},
		opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","role":"server","zeroCopy":true}`))
	_, err := d.Prepare(c)
	if err == nil || !strings.Contains(err.Error(), `claim ns1/per-pod`) ||
		!strings.Contains(err.Error(), `request vswitch: field "role": "server" on a host port: the node's data plane is always the server`) {
		t.Fatalf("Prepare: %v, want a refusal naming the request and field \"role\"", err)
	}
	if p := d.Prepared(); len(p) != 0 {
		t.Errorf("a refused claim left a record: %+v", p)
	}
	if ents, _ := os.ReadDir(e.cdiDir); len(ents) != 0 {
		t.Errorf("a refused claim left a CDI spec: %v", ents)
	}
	for _, f := range hostFiles(e, "dra-slot-003") {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused claim left %s: %v", f, err)
		}
	}
	if _, err := os.Stat(planted); err != nil {
		t.Errorf("the slot was scrubbed for a refused claim: %v", err)
	}
}

// A claim's parameters reach the host VPP's vpp.cli (run as root): whoever may create a claim
// cannot smuggle a command in through them. A port name that is not a plain name is refused at
// Prepare, before anything is written.
func TestHostPortHostileName(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	for i, name := range []string{"x\ncreate tap", "up;exec /x", "a b"} {
		c := claim("uid-x"+string(rune('0'+i)), "per-pod", []alloc{{"vswitch", "dra-slot-003"}},
			opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","name":`+jsonString(name)+`}`))
		if _, err := d.Prepare(c); err == nil || !strings.Contains(err.Error(), `field "name"`) {
			t.Errorf("name %q: err = %v, want a refusal naming the field", name, err)
		}
		if _, err := os.Stat(filepath.Join(e.state, names.StoreSubdir, names.HostPortsSubdir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("name %q: host-ports written: %v", name, err)
		}
	}
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// Static addresses are checked before anything is touched: mode ip only, the API server's
// canonical CIDR form (so that the claim status takes them), at most 16, none twice.
func TestPrepareBadIPs(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	many := make([]string, 17)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("192.0.2.%d/24", i+1))
	}
	for _, tc := range []struct{ cfg, want string }{
		{`"ips":["192.0.2.1/24"]`, `field "ips": set, but the port's mode is ethernet`},
		{`"mode":"ip","ips":["192.0.2.1"]`, `"192.0.2.1" is not an address in CIDR notation`},
		{`"mode":"ip","ips":["::ffff:192.0.2.1/120"]`, `is not an address in CIDR notation`},
		{`"mode":"ip","ips":["2001:DB8::1/64"]`, `"2001:DB8::1/64", write it "2001:db8::1/64"`},
		{`"mode":"ip","ips":["192.0.2.1/24","192.0.2.1/24"]`, `"192.0.2.1/24" twice`},
		{`"mode":"ip","ips":[` + strings.Join(many, ",") + `]`, `17 addresses, at most 16`},
	} {
		c := claim("uid-b", "l", linkAllocs, opaque(`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig",`+tc.cfg+`}`, "west"))
		_, err := d.Prepare(c)
		if err == nil || !strings.Contains(err.Error(), "request west: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.cfg, err, tc.want)
		}
		if p := d.Prepared(); len(p) != 0 {
			t.Errorf("%s: a refused claim left a record", tc.cfg)
		}
	}
}

func mustReadFile(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
