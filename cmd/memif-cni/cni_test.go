package main_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// hostSpec reads a slot's port.json and rewrites its socket to the host path, which is what the
// container would see at /run/memifnet/<slot>.
func (n *node) hostSpec(slot string) portspec.PortSpec {
	n.t.Helper()
	s, err := portspec.Read(filepath.Join(n.slotDir(slot), "port.json"))
	if err != nil {
		n.t.Fatal(err)
	}
	rel, ok := strings.CutPrefix(s.Socket, "/run/memifnet/")
	if !ok {
		n.t.Fatalf("socket %q is not under /run/memifnet", s.Socket)
	}
	s.Socket = filepath.Join(n.stateDir, "sockets", rel)
	return s
}

// exchange opens both specs and sends count sequence-numbered packets each way, verifying every
// payload byte.
func exchange(t *testing.T, a, b portspec.PortSpec, count int) {
	t.Helper()
	open := func(s portspec.PortSpec) *memif.Interface {
		cfg, err := memif.PortConfig(s)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Logger = memiftest.QuietLogger()
		cfg.NewRegion, cfg.Memory = nil, alloc.BackingMemfd // no pool units; hugepages may be absent
		ifc, err := memif.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ifc.Close() })
		return ifc
	}
	ia, ib := open(a), open(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, ifc := range []*memif.Interface{ia, ib} {
		if err := ifc.WaitUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for dir, pair := range [][2]*memif.Interface{{ia, ib}, {ib, ia}} {
		tx, rx := pair[0].TxQueue(0), pair[1].RxQueue(0)
		buf := [][]byte{make([]byte, 2048)}
		recv := 0
		for sent := 0; recv < count; {
			if sent < count {
				pkt := make([]byte, 64+sent%512)
				binary.BigEndian.PutUint32(pkt, uint32(sent))
				for i := 4; i < len(pkt); i++ {
					pkt[i] = byte(sent + i)
				}
				sent += tx.TxBurst([][]byte{pkt})
			}
			for rx.RxBurst(buf) == 1 {
				p := buf[0]
				seq := int(binary.BigEndian.Uint32(p))
				if seq != recv || len(p) != 64+seq%512 {
					t.Fatalf("direction %d: got packet %d of %d bytes, want %d", dir, seq, len(p), recv)
				}
				for i := 4; i < len(p); i++ {
					if p[i] != byte(seq+i) {
						t.Fatalf("direction %d: packet %d byte %d = %#x", dir, seq, i, p[i])
					}
				}
				recv++
				buf[0] = buf[0][:cap(buf[0])]
			}
			if ctx.Err() != nil {
				t.Fatalf("direction %d: %d of %d packets arrived", dir, recv, count)
			}
		}
	}
}

func TestLinkTwoPodsExchangeTraffic(t *testing.T) {
	n := newNode(t, 4)
	a := n.newPod("east@chain-1", "slot-000")
	b := n.newPod(`[{"name":"west","link":"chain-1","queues":1,"ringSize":256}]`, "slot-002")
	ra := n.mustAdd(a)
	rb := n.mustAdd(b)

	if len(ra.Interfaces) != 1 || ra.Interfaces[0].SocketPath != "/run/memifnet/slot-000/link/memif.sock" ||
		ra.Interfaces[0].Name != "east" || ra.Interfaces[0].Sandbox != a.NS.Path() {
		t.Fatalf("result of pod a: %+v", ra.Interfaces[0])
	}
	if rb.Interfaces[0].SocketPath != "/run/memifnet/slot-002/link/memif.sock" {
		t.Fatalf("result of pod b: %+v", rb.Interfaces[0])
	}
	sa, sb := n.hostSpec("slot-000"), n.hostSpec("slot-002")
	if sa.Role != "server" || sb.Role != "client" || sa.Secret == "" || sa.Secret != sb.Secret || sa.MAC == sb.MAC {
		t.Fatalf("specs: %+v / %+v", sa, sb)
	}
	// Both slots show the same directory: the link's.
	fa, _ := os.Stat(filepath.Dir(sa.Socket))
	fb, _ := os.Stat(filepath.Dir(sb.Socket))
	if fa == nil || fb == nil || !os.SameFile(fa, fb) {
		t.Fatal("the two slots' link/ directories are not the same directory")
	}
	// Device-info for Multus.
	var info struct {
		Type  string
		Memif struct{ Role, Path, Mode string }
	}
	b1, err := os.ReadFile(filepath.Join(n.devinfoDir, "cni", "memifnet-"+a.ContainerID+"_net1-east-device.json"))
	if err != nil || json.Unmarshal(b1, &info) != nil || info.Type != "memif" || info.Memif.Role != "master" || info.Memif.Path != ra.Interfaces[0].SocketPath {
		t.Fatalf("device-info: %s %v", b1, err)
	}
	if err := n.cni.CheckNetworkList(context.Background(), n.confList(), a.rt(true)); err != nil {
		t.Fatalf("CHECK: %v", err)
	}

	exchange(t, sa, sb, 2000)

	n.mustDel(a)
	// The link stays for b until b leaves.
	if _, err := os.Stat(filepath.Join(n.stateDir, "links", "default", "chain-1")); err != nil {
		t.Fatalf("link dir gone while pod b is still on it: %v", err)
	}
	n.mustDel(b)
	for _, p := range []*pod{a, b} {
		if err := n.del(p); err != nil {
			t.Fatalf("second DEL: %v", err)
		}
		if err := n.delBare(p); err != nil {
			t.Fatalf("DEL without netns and prevResult: %v", err)
		}
	}
	n.assertClean()
}

func TestHostPortAndRoles(t *testing.T) {
	n := newNode(t, 3)
	p := n.newPod(`[{"name":"up","peer":"host","id":2,"zeroCopy":true},{"name":"cl","peer":"host","role":"client","mode":"ip"}]`, "slot-002", "slot-001")
	r := n.mustAdd(p)
	if len(r.Interfaces) != 2 || r.Interfaces[0].SocketPath != "/run/memifnet/slot-001/memif.sock" || r.Interfaces[1].SocketPath != "/run/memifnet/slot-002/memif.sock" {
		t.Fatalf("ports must map to slots in sorted order: %+v %+v", r.Interfaces[0], r.Interfaces[1])
	}
	up, cl := n.hostSpec("slot-001"), n.hostSpec("slot-002")
	if up.Role != "client" || up.ID != 2 || !up.ZeroCopy || cl.Role != "client" || cl.Mode != "ip" || cl.MAC != "" {
		t.Fatalf("specs %+v %+v", up, cl)
	}
	// The host's end is always the server in copy mode, and names the attachment it belongs to.
	var hp peerconf.HostPort
	b, err := os.ReadFile(filepath.Join(n.stateDir, "state", "host-ports", "slot-001.json"))
	if err != nil || json.Unmarshal(b, &hp) != nil || hp.Role != "server" || hp.Socket != filepath.Join(n.slotDir("slot-001"), "memif.sock") ||
		hp.Owner != (peerconf.Owner{ContainerID: p.ContainerID, IfName: "net1", PodUID: p.UID}) {
		t.Fatalf("host port description: %s %v", b, err)
	}
	// The ready configs (internal/peerconf): each side's beside its port.json / description;
	// the ip port has none for DPDK (Ethernet only). assertClean checks that DEL takes them.
	hostPorts := filepath.Join(n.stateDir, "state", "host-ports")
	for f, want := range map[string]string{
		filepath.Join(n.slotDir("slot-001"), "dpdk.args"):     "--vdev=net_memif10001,role=client,id=2,socket=/run/memifnet/slot-001/memif.sock,",
		filepath.Join(n.slotDir("slot-001"), "port.env"):      "\nMEMIF_SOCKET=/run/memifnet/slot-001/memif.sock\n",
		filepath.Join(n.slotDir("slot-002"), "vpp.cli"):       "create interface memif id 0 socket-id 10002 ring-size 1024 buffer-size 2048 slave rx-queues 1 tx-queues 1 mode ip no-zero-copy\n",
		filepath.Join(hostPorts, "slot-001.dpdk.args"):        "--vdev=net_memif10001,role=server,id=2,socket=" + filepath.Join(n.slotDir("slot-001"), "memif.sock") + ",",
		filepath.Join(hostPorts, "slot-001.env"):              "\nMEMIF_POD=" + p.Namespace + "/" + p.Name + "\n",
		filepath.Join(hostPorts, "slot-002.vpp.cli"):          " master rx-queues 1 tx-queues 1 mode ip\n",
		filepath.Join(hostPorts, "slot-002.dpdk.app-args"):    "",
		filepath.Join(n.slotDir("slot-002"), "dpdk.app-args"): "",
	} {
		b, err := os.ReadFile(f)
		switch {
		case want == "" && !errors.Is(err, os.ErrNotExist):
			t.Errorf("%s: %q %v, want no file (an ip port)", f, b, err)
		case want != "" && (err != nil || !strings.Contains(string(b), want)):
			t.Errorf("%s = %q (%v), want it to hold %q", f, b, err, want)
		}
	}
	n.mustDel(p)
	n.assertClean()
}

func TestNoPortsPassesThrough(t *testing.T) {
	n := newNode(t, 1)
	p := n.newPod("", "slot-000")
	r := n.mustAdd(p)
	if len(r.Interfaces) != 0 {
		t.Fatalf("pod without ports got %+v", r.Interfaces)
	}
	n.mustDel(p)
	n.assertClean()
}

// TestDelMakesNoState: a DEL with no attachment on record (a pod without ports; chained, the DEL
// of a pod torn down while memifnet is uninstalled, which the agent's clean-up may precede) makes
// no state directory: the node stays as the uninstall left it. Tier 3 saw state/attachments come
// back after `kubectl delete -k`.
func TestDelMakesNoState(t *testing.T) {
	n := newNode(t, 1)
	p := n.newPod("", "slot-000")
	n.mustDel(p)
	if err := n.delBare(p); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(n.stateDir, "state")); !os.IsNotExist(err) {
		t.Fatalf("DEL made memif-cni's state dir (%v)", err)
	}
	n.assertClean()
}

func TestBadInputErrors(t *testing.T) {
	n := newNode(t, 2)
	for _, tc := range []struct {
		name       string
		annotation string
		extra      map[string]any
		code       uint
		want       string
	}{
		{"unknown config key", "east@l", map[string]any{"stateDri": "/x"}, 7, `unknown field "stateDri"`},
		{"relative path", "east@l", map[string]any{"kubeletDir": "kubelet"}, 7, `field "kubeletDir"`},
		{"wrong type", "east@l", map[string]any{"timeoutSeconds": "ten"}, 7, `field "timeoutSeconds"`},
		{"ipam without type", "east@l", map[string]any{"ipam": map[string]any{}}, 7, `field "ipam.type"`},
		{"unknown port field", `[{"name":"east","link":"l","colour":"red"}]`, nil, 7, `unknown field "colour"`},
		{"bad ring", `[{"name":"east","link":"l","ringSize":1000}]`, nil, 7, `field "ringSize"`},
		{"bad name", `East@l`, nil, 7, `field "name"`},
		{"no link nor peer", `[{"name":"east"}]`, nil, 7, `field "link"`},
		{"bad json", `[{"name":"east"`, nil, 7, `not a JSON list`},
		// memif-webhook pins {ordinal} at admission; memif-cni never resolves one from labels.
		{"unresolved ordinal", `east@ab-{ordinal}`, nil, 7, `field "link": "ab-{ordinal}": {ordinal} is resolved from the pod's label apps.kubernetes.io/pod-index by memif-webhook`},
		{"too few slots", `a@l1,b@l2,c`, nil, 101, `resources.limits["memifnet.io/socket"] to 3`},
		// A pod never chooses the node's side of its host port (docs/security.md row 32).
		{"host port serves", `[{"name":"up","peer":"host","role":"server","zeroCopy":true}]`, nil, 7, `port 0 (up): field "role": "server" on a host port: the node's data plane is always the server`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.extra = tc.extra
			defer func() { n.extra = map[string]any{} }()
			p := n.newPod(tc.annotation, "slot-000", "slot-001")
			_, err := n.add(p)
			if err == nil {
				t.Fatal("ADD succeeded")
			}
			e := cniError(t, err)
			if e.Code != tc.code || !strings.Contains(e.Error(), tc.want) {
				t.Fatalf("error code %d %q, want code %d containing %q", e.Code, e.Error(), tc.code, tc.want)
			}
			if err := n.delBare(p); err != nil && tc.extra == nil {
				t.Fatalf("DEL after failed ADD: %v", err)
			}
			n.assertClean()
		})
	}
}

func TestLinkConflicts(t *testing.T) {
	n := newNode(t, 4)
	a := n.newPod(`[{"name":"a","link":"l","role":"client","id":1}]`, "slot-000")
	n.mustAdd(a)
	for _, tc := range []struct{ ann, want string }{
		{`[{"name":"b","link":"l","role":"client","id":1}]`, `field "role"`},
		{`[{"name":"b","link":"l","id":2}]`, `field "id"`},
		{`[{"name":"b","link":"l","id":1,"mode":"ip"}]`, `field "mode"`},
	} {
		b := n.newPod(tc.ann, "slot-001")
		_, err := n.add(b)
		if e := cniError(t, err); e.Code != 102 || !strings.Contains(e.Error(), tc.want) {
			t.Fatalf("%s: %v", tc.ann, e)
		}
		if ents, _ := os.ReadDir(n.slotDir("slot-001")); len(ents) != 0 {
			t.Fatalf("failed ADD left %v in its slot", ents)
		}
	}
	b := n.newPod(`[{"name":"b","link":"l","id":1}]`, "slot-001")
	n.mustAdd(b)
	c := n.newPod(`c@l`, "slot-002")
	if _, err := n.add(c); cniError(t, err).Code != 102 || !strings.Contains(err.Error(), "at most 2 pods") {
		t.Fatalf("third pod on a link: %v", err)
	}
	if n.hostSpec("slot-001").Role != "server" {
		t.Fatal("the second pod must take the role the first left free")
	}
	n.mustDel(a)
	n.mustDel(b)
	n.assertClean()
}

func TestPodLookupFallbacks(t *testing.T) {
	n := newNode(t, 2)
	n.caps = false // the runtime passes no annotations
	a := n.newPod("east@via", "slot-000")
	// No source at all: try again later, with a message that says what to configure.
	_, err := n.add(a)
	if e := cniError(t, err); e.Code != 11 || !strings.Contains(e.Error(), "no kubeconfig") {
		t.Fatalf("no source: %v", e)
	}
	n.extra = map[string]any{"insecureKubeletPodsAPI": true, "kubeletURL": n.kubelet.ServePodsAPI(t)}
	if r := n.mustAdd(a); len(r.Interfaces) != 1 {
		t.Fatalf("Pods API: %+v", r)
	}
	b := n.newPod("west@via", "slot-001")
	n.extra = map[string]any{"insecureKubeletPodsAPI": true, "kubeletURL": "https://127.0.0.1:1", "kubeconfig": n.kubelet.ServeAPIServer(t, n.root)}
	if r := n.mustAdd(b); len(r.Interfaces) != 1 {
		t.Fatalf("API server: %+v", r)
	}
	if n.hostSpec("slot-001").Role != "client" {
		t.Fatal("pod b should be the link's client")
	}
	n.kubelet.SetNoGet(true) // PodResources List fallback
	n.mustDel(b)
	if r := n.mustAdd(b); len(r.Interfaces) != 1 || n.kubelet.Lists() == 0 {
		t.Fatalf("List fallback: %+v lists=%d", r, n.kubelet.Lists())
	}
	n.mustDel(a)
	n.mustDel(b)
	n.assertClean()
}

// TestKubeletPodsAPINotTriedByDefault (security row 41): the kubelet's Pods API is asked
// anonymously with the kubelet's certificate unverified, so memif-cni asks it only when the
// network config opts in. A config without the opt-in (the default, the installer's) never
// connects to the kubelet's address, and says so; one with a kubeletURL but no opt-in is refused
// (code 7) before anything is asked.
func TestKubeletPodsAPINotTriedByDefault(t *testing.T) {
	n := newNode(t, 1)
	n.caps = false // the runtime passes no annotations: the fallbacks are what is left
	a := n.newPod("east@via", "slot-000")
	// A listener on the default address (https://127.0.0.1:10250) counts connections; when the
	// port is taken (a kubelet on this machine), the count is left out and the rest still holds.
	var dials atomic.Int32
	if ln, err := net.Listen("tcp", "127.0.0.1:10250"); err != nil {
		t.Logf("127.0.0.1:10250 is taken (%v): connections to the default address not counted", err)
	} else {
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				dials.Add(1)
				c.Close()
			}
		}()
	}
	n.extra = map[string]any{"kubeletURL": nil} // the default config
	_, err := n.add(a)
	if e := cniError(t, err); e.Code != 11 || !strings.Contains(e.Error(), `kubelet Pods API: off ("insecureKubeletPodsAPI" not set)`) {
		t.Fatalf("default config: %v, want code 11 saying the kubelet Pods API is off", err)
	}
	// A served Pods API that knows the pod, named without the opt-in.
	var asked atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1); http.NotFound(w, r) }))
	t.Cleanup(srv.Close)
	n.extra = map[string]any{"kubeletURL": srv.URL}
	_, err = n.add(a)
	if e := cniError(t, err); e.Code != 7 || !strings.Contains(e.Error(), `set "insecureKubeletPodsAPI": true to use it`) {
		t.Fatalf("kubeletURL without the opt-in: %v, want code 7 naming the opt-in", err)
	}
	if dials.Load() != 0 || asked.Load() != 0 {
		t.Fatalf("the kubelet was asked without the opt-in: %d connection(s) to 127.0.0.1:10250, %d request(s) to kubeletURL", dials.Load(), asked.Load())
	}
	n.assertClean()
}

func TestChainedPrevResult(t *testing.T) {
	n := newNode(t, 1)
	p := n.newPod("east@x", "slot-000")
	conf := n.confList()
	prev := []byte(`{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"` + p.NS.Path() + `"}],
		"ips":[{"address":"10.0.0.5/24","interface":0}]}`)
	raw, err := libcni.InjectConf(conf.Plugins[0], map[string]any{"prevResult": json.RawMessage(prev), "name": "memifnet", "cniVersion": "1.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := n.cni.AddNetwork(context.Background(), raw, p.rt(true))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"eth0"`) || !strings.Contains(string(b), "10.0.0.5/24") || !strings.Contains(string(b), "socketPath") {
		t.Fatalf("prevResult not passed through: %s", b)
	}
	n.mustDel(p)
	n.assertClean()
}

func TestStatusAndGC(t *testing.T) {
	n := newNode(t, 3)
	if err := n.cni.GetStatusNetworkList(context.Background(), n.confList()); err != nil {
		t.Fatalf("STATUS: %v", err)
	}
	keep := n.newPod("a@g1", "slot-000")
	drop := n.newPod("b@g1", "slot-001")
	drop2 := n.newPod("c", "slot-002")
	for _, p := range []*pod{keep, drop, drop2} {
		n.mustAdd(p)
	}
	// A fresh libcni cache: the runtime's GC knows only the valid list, as after a restart.
	gc := newCNI([]string{pluginDir(t)}, filepath.Join(n.root, "cache-gc"))
	err := gc.GCNetworkList(context.Background(), n.confList(), &libcni.GCArgs{
		ValidAttachments: []types.GCAttachment{{ContainerID: keep.ContainerID, IfName: "net1"}}})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	ln := filepath.Join(n.stateDir, "state", "links", "default", "g1.json")
	data, err := os.ReadFile(ln)
	if err != nil || strings.Contains(string(data), drop.ContainerID) || !strings.Contains(string(data), keep.ContainerID) {
		t.Fatalf("link record after GC: %s %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(n.slotDir("slot-002"), "port.json")); !os.IsNotExist(err) {
		t.Fatalf("GC left the dropped host port: %v", err)
	}
	n.mustDel(keep)
	n.assertClean()

	os.RemoveAll(filepath.Join(n.kubeletDir, "pod-resources"))
	err = n.cni.GetStatusNetworkList(context.Background(), n.confList())
	if e := cniError(t, err); e.Code != 50 || !strings.Contains(e.Error(), "PodResources socket") {
		t.Fatalf("STATUS without kubelet: %v", err)
	}
}

// TestCrashAfterEachStepIsUndoneByDel kills the plugin after each step of ADD (a failpoint build
// exits at once, skipping all cleanup) and checks the runtime's DEL leaves nothing.
func TestCrashAfterEachStepIsUndoneByDel(t *testing.T) {
	n := newNode(t, 3)
	n.cni = newCNI([]string{failpointDir(t)}, filepath.Join(n.root, "cache"))
	other := n.newPod("peer@crash", "slot-002")
	n.mustAdd(other) // a second pod on the link, so the crashing pod joins as client
	for _, step := range []string{"record", "join", "mount", "portjson", "devinfo", "hostdesc", "done"} {
		t.Run(step, func(t *testing.T) {
			p := n.newPod(`[{"name":"east","link":"crash"},{"name":"west","peer":"host"}]`, "slot-000", "slot-001")
			t.Setenv("MEMIFNET_CNI_FAILPOINT", step)
			if _, err := n.add(p); err == nil {
				t.Fatalf("ADD survived failpoint %s", step)
			}
			t.Setenv("MEMIFNET_CNI_FAILPOINT", "")
			if err := n.delBare(p); err != nil {
				t.Fatalf("DEL after crash at %s: %v", step, err)
			}
			if err := n.delBare(p); err != nil {
				t.Fatalf("second DEL after crash at %s: %v", step, err)
			}
			for _, slot := range []string{"slot-000", "slot-001"} {
				if ents, _ := os.ReadDir(n.slotDir(slot)); len(ents) != 0 {
					t.Fatalf("crash at %s: %s keeps %v", step, slot, ents)
				}
			}
			ln, _ := os.ReadFile(filepath.Join(n.stateDir, "state", "links", "default", "crash.json"))
			if strings.Contains(string(ln), p.ContainerID) {
				t.Fatalf("crash at %s: link still lists the pod: %s", step, ln)
			}
			// The surviving pod keeps its link.
			if !strings.Contains(string(ln), other.ContainerID) {
				t.Fatalf("crash at %s: the other pod lost its link: %s", step, ln)
			}
		})
	}
	n.mustDel(other)
	n.assertClean()
}

// TestHundredPodsConcurrently attaches 100 pods on 50 links at once, then replaces one end of
// every link while the others stay, then detaches all at once.
func TestHundredPodsConcurrently(t *testing.T) {
	const pods = 100
	n := newNode(t, pods+pods/2)
	all := make([]*pod, pods)
	for i := range all {
		all[i] = n.newPod(fmt.Sprintf("p@link-%d", i/2), fmt.Sprintf("slot-%03d", i))
	}
	parallel := func(ps []*pod, f func(*pod) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(ps))
		for _, p := range ps {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- f(p) }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	addFn := func(p *pod) error {
		_, err := n.add(p)
		if err != nil {
			return fmt.Errorf("ADD %s: %w", p.Name, err)
		}
		return nil
	}
	delFn := func(p *pod) error {
		if err := n.del(p); err != nil {
			return fmt.Errorf("DEL %s: %w", p.Name, err)
		}
		return nil
	}
	checkLinks := func(members map[int][2]*pod) {
		t.Helper()
		for l, ps := range members {
			roles := map[string]bool{}
			var dir os.FileInfo
			for _, p := range ps {
				s := n.hostSpec(p.Slots[0])
				roles[s.Role] = true
				fi, err := os.Stat(filepath.Dir(s.Socket))
				if err != nil {
					t.Fatal(err)
				}
				if dir != nil && !os.SameFile(dir, fi) {
					t.Fatalf("link-%d: pods see different directories", l)
				}
				dir = fi
			}
			var ln struct{ Members []struct{ Key string } }
			b, err := os.ReadFile(filepath.Join(n.stateDir, "state", "links", "default", fmt.Sprintf("link-%d.json", l)))
			if err != nil || json.Unmarshal(b, &ln) != nil || len(ln.Members) != 2 || !roles["server"] || !roles["client"] {
				t.Fatalf("link-%d: record %s, roles %v, %v", l, b, roles, err)
			}
		}
	}

	parallel(all, addFn)
	members := map[int][2]*pod{}
	for i := 0; i < pods; i += 2 {
		members[i/2] = [2]*pod{all[i], all[i+1]}
	}
	checkLinks(members)

	// Replace the first pod of every link while the second stays: 50 DELs and 50 ADDs at once.
	var ops []*pod
	repl := make([]*pod, pods/2)
	for l := range repl {
		repl[l] = n.newPod(fmt.Sprintf("q@link-%d", l), fmt.Sprintf("slot-%03d", pods+l))
		ops = append(ops, all[2*l], repl[l])
	}
	parallel(ops, func(p *pod) error {
		if strings.HasPrefix(p.Annotation, "q@") {
			// The replacement may arrive before the old pod left: a full link is a retryable
			// conflict for the runtime, which retries sandbox creation.
			for {
				_, err := n.add(p)
				if err == nil {
					return nil
				}
				if !strings.Contains(err.Error(), "at most 2 pods") {
					return fmt.Errorf("ADD %s: %w", p.Name, err)
				}
			}
		}
		return delFn(p)
	})
	for l := range repl {
		members[l] = [2]*pod{all[2*l+1], repl[l]}
	}
	checkLinks(members)

	var rest []*pod
	for _, m := range members {
		rest = append(rest, m[0], m[1])
	}
	parallel(rest, delFn)
	n.assertClean()
}

// TestIPAMDelegated: ports in ip mode get their addresses from the delegated IPAM plugin, here
// the real host-local of containernetworking-plugins. Each port gets its own address, the result
// ties it to the port's interface, port.json carries it, and DEL gives every lease back.
func TestIPAMDelegated(t *testing.T) {
	const hostLocal = "/usr/lib/cni/host-local"
	if _, err := os.Stat(hostLocal); err != nil {
		testutil.SkipOrFail(t, "%v: apt-get install -y containernetworking-plugins", err)
	}
	n := newNode(t, 2)
	n.cni = newCNI([]string{pluginDir(t), filepath.Dir(hostLocal)}, filepath.Join(n.root, "cache"))
	// Debian 12's plugins (1.1.1) speak CNI up to 1.0.0; the delegated plugin must support the
	// conflist's version, so this network uses 1.0.0.
	n.cniVersion = "1.0.0"
	leases := filepath.Join(n.root, "ipam")
	n.extra = map[string]any{"ipam": map[string]any{"type": "host-local", "dataDir": leases,
		"ranges": [][]map[string]string{{{"subnet": "10.77.0.0/24"}}}}}
	p := n.newPod(`[{"name":"up","peer":"host","mode":"ip"},{"name":"down","peer":"host","mode":"ip"}]`, "slot-000", "slot-001")
	r := n.mustAdd(p)
	if len(r.IPs) != 2 || len(r.Interfaces) != 2 {
		t.Fatalf("result: %d IPs on %d interfaces, want 2 on 2: %+v", len(r.IPs), len(r.Interfaces), r)
	}
	for i, ip := range r.IPs {
		if !strings.HasPrefix(ip.Address.String(), "10.77.0.") || ip.Address.String() == r.IPs[1-i].Address.String() {
			t.Errorf("port %d: address %s (the other has %s)", i, ip.Address.String(), r.IPs[1-i].Address.String())
		}
		if ip.Interface == nil || r.Interfaces[*ip.Interface].Name != []string{"up", "down"}[i] {
			t.Errorf("address %s is not tied to port %d's interface", ip.Address.String(), i)
		}
		if spec := n.hostSpec(p.Slots[i]); len(spec.IPs) != 1 || spec.IPs[0] != ip.Address.String() {
			t.Errorf("port.json of %s has IPs %v, the result %s", p.Slots[i], spec.IPs, ip.Address.String())
		}
	}
	n.mustDel(p)
	// host-local keeps one file per leased address under <dataDir>/<network name>/.
	if left, _ := filepath.Glob(filepath.Join(leases, "memifnet", "10.77.*")); len(left) != 0 {
		t.Errorf("leases left after DEL: %v", left)
	}
	n.assertClean()
}

// TestDelOfRecordsFromBeforeTmpfsLinks: a pod wired by a memif-cni from before slot claims and
// tmpfs link directories (records without network, slot or link mounts; a plain link directory
// the pods wrote into) is torn down after the upgrade: DEL succeeds and removes the records, and
// leaves the old plain directory (never descending into a pod-written tree) and the slot (its
// next scrub replaces it) alone.
func TestDelOfRecordsFromBeforeTmpfsLinks(t *testing.T) {
	n := newNode(t, 1)
	p := n.newPod("a@old", "slot-000")
	key := p.ContainerID + "_net1"
	store := filepath.Join(n.stateDir, "state")
	legacyLink := filepath.Join(n.stateDir, "links", "default", "old")
	for path, body := range map[string]string{
		filepath.Join(store, "attachments", key+".json"): `{"containerID":"` + p.ContainerID + `","ifName":"net1","namespace":"default","pod":"` + p.Name +
			`","ports":[{"name":"a","slot":"slot-000","link":"old","mode":"ethernet","role":"server","devInfo":"` + filepath.Join(n.devinfoDir, "cni", "x.json") + `"}]}`,
		filepath.Join(store, "links", "default", "old.json"): `{"namespace":"default","name":"old","id":0,"mode":"ethernet","secret":"00",` +
			`"members":[{"key":"` + key + `","pod":"` + p.Name + `","port":"a","role":"server"}]}`,
		filepath.Join(legacyLink, "memif.sock"): "",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.mustDel(p)
	n.mustDel(p)
	for _, gone := range []string{filepath.Join(store, "attachments", key+".json"), filepath.Join(store, "links", "default", "old.json")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Fatalf("%s after DEL: %v", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(legacyLink, "memif.sock")); err != nil {
		t.Fatalf("DEL went into the old link directory: %v", err)
	}
}
