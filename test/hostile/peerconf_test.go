package hostile_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// TestAttackPeerConfigFiles (attack 19): the ready configs memif-cni writes beside port.json
// (dpdk.args, dpdk.app-args, vpp.cli, port.env) are in the pod's slot. A pod with a host port
// plants symlinks to host files (and a dangling one) at those names and gets its sandbox
// re-created: ADD must replace each name with its own file and never write through. Then the
// pod rewrites its vpp.cli with commands of its own: the host side's <slot>.vpp.cli, which a
// host VPP runs as root, is the agent's file in the state directory and does not change. DEL
// takes both sides' files.
func TestAttackPeerConfigFiles(t *testing.T) {
	n := newNode(t, nodeOptions{})
	shadow, kubeconf := n.hostFile("shadow"), n.hostFile("kubelet.conf")
	dangling := filepath.Join(n.root, "host", "created-by-pod")
	a := n.newPod("a", "west", "", "slot-000")
	n.allocate(a)
	n.mustAdd(a)
	pa := n.start(a, runAs{}, "")
	slot := "/run/memifnet/slot-000/"
	for name, target := range map[string]string{
		names.DPDKArgsFile: shadow.path, names.VPPFile: kubeconf.path, names.EnvFile: dangling, names.DPDKAppArgsFile: dangling,
	} {
		pa.must("remove", slot+name)
		pa.must("symlink", target, slot+name)
	}

	must(t, n.recreateSandbox(a))
	shadow.assertUntouched(t)
	kubeconf.assertUntouched(t)
	if _, err := os.Lstat(dangling); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dangling symlink made memif-cni create %s: %v", dangling, err)
	}
	podCLI := "create memif socket id 10000 filename /run/memifnet/slot-000/memif.sock\n"
	if got := pa.must("read", slot+names.VPPFile); !strings.HasPrefix(got, podCLI) {
		t.Fatalf("the pod reads vpp.cli %q, want it to start with %q", got, podCLI)
	}
	if got := pa.must("read", slot+names.EnvFile); !strings.Contains(got, "\nMEMIF_ROLE=client\n") {
		t.Fatalf("the pod reads port.env %q", got)
	}

	hostCLI := filepath.Join(n.stateDir, names.StoreSubdir, "host-ports", "slot-000."+names.VPPFile)
	before, err := os.ReadFile(hostCLI)
	if err != nil || !strings.HasPrefix(string(before), "create memif socket id 10000 filename "+filepath.Join(n.slotHost("slot-000"), names.SocketFile)+"\n") ||
		!strings.Contains(string(before), " master ") {
		t.Fatalf("host side's vpp.cli: %q %v", before, err)
	}
	pa.must("remove", slot+names.VPPFile)
	pa.must("write", slot+names.VPPFile, "exec /etc/evil.cli\n")
	if after, err := os.ReadFile(hostCLI); err != nil || string(after) != string(before) {
		t.Fatalf("the pod's write changed the host side's vpp.cli: %q %v", after, err)
	}

	n.mustDel(a, a.sandbox)
	left, _ := filepath.Glob(filepath.Join(n.stateDir, names.StoreSubdir, "host-ports", "slot-000*"))
	for _, name := range []string{names.DPDKArgsFile, names.DPDKAppArgsFile, names.VPPFile, names.EnvFile} {
		if _, err := os.Lstat(filepath.Join(n.slotHost("slot-000"), name)); !errors.Is(err, os.ErrNotExist) {
			left = append(left, name)
		}
	}
	if len(left) > 0 {
		t.Fatalf("DEL left %v", left)
	}
}

// hostSide is the host side's files of slot in the node's state directory: the description
// first, then the ready configs beside it.
func (n *node) hostSide(slot string) []string {
	base := filepath.Join(n.stateDir, names.StoreSubdir, names.HostPortsSubdir, slot)
	return []string{base + ".json", base + "." + names.DPDKArgsFile, base + "." + names.DPDKAppArgsFile, base + "." + names.VPPFile, base + names.HostEnvSuffix}
}

// assertHostSide checks that p's host port in slot has its whole host side, the server's, and
// that its description names p's current sandbox as the owner.
func (n *node) assertHostSide(p *pod, slot string) {
	n.t.Helper()
	files := n.hostSide(slot)
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			n.t.Fatalf("%s's host side: %v", p.Name, err)
		}
	}
	b, err := os.ReadFile(files[0])
	must(n.t, err)
	// The description's fields as a data plane reads them (peerconf.HostPort).
	type owner struct{ ContainerID, IfName, PodUID, ClaimUID string }
	var hp struct {
		Pod, Role string
		Owner     owner
	}
	must(n.t, json.Unmarshal(b, &hp))
	want := owner{ContainerID: p.containerID(), IfName: "net1", PodUID: p.UID}
	if hp.Pod != p.Name || hp.Role != portspec.RoleServer || hp.Owner != want {
		n.t.Fatalf("%s's host side describes %+v, want pod %s, the server, owner %+v", p.Name, hp, p.Name, want)
	}
}

// TestAttackHostPortRole (attacks 32, 33): a pod asks its host port to serve ("role":
// "server"), with or without "zeroCopy". memif-cni wrote the node's side as a memif client: a
// zero-copy one handed the node data plane's buffer memory (every DPDK memseg, every VPP buffer
// pool) to the pod, and any client dialled <slot>/memif.sock by path, which the pod replaces by a
// symlink to another pod's host-port socket. ADD must refuse, naming the field, and leave nothing:
// no host side, no port.json, no claim.
func TestAttackHostPortRole(t *testing.T) {
	n := newNode(t, nodeOptions{})
	for i, ann := range []string{
		`[{"name":"up","peer":"host","role":"server","zeroCopy":true}]`,
		`[{"name":"up","peer":"host","role":"server"}]`,
	} {
		p := n.newPod(fmt.Sprintf("p%d", i), ann, "", "slot-000")
		n.allocate(p)
		err := n.add(p)
		if err == nil {
			b, _ := os.ReadFile(n.hostSide("slot-000")[1])
			t.Fatalf("ADD of %s succeeded; the node's side: %q", ann, b)
		}
		e := cniError(t, err)
		if e.Code != 7 || !strings.Contains(e.Error(), `field "role": "server" on a host port: the node's data plane is always the server`) {
			t.Fatalf("ADD of %s: code %d %q, want code 7 naming field \"role\"", ann, e.Code, e.Error())
		}
		left, _ := filepath.Glob(filepath.Join(n.stateDir, names.StoreSubdir, names.HostPortsSubdir, "*"))
		claims, _ := filepath.Glob(filepath.Join(n.stateDir, names.StoreSubdir, "slots", "*"))
		if _, err := os.Lstat(filepath.Join(n.slotHost("slot-000"), names.PortFile)); !errors.Is(err, os.ErrNotExist) {
			left = append(left, names.PortFile)
		}
		if len(left)+len(claims) > 0 {
			t.Fatalf("a refused ADD left %v %v", left, claims)
		}
		n.mustDel(p, p.sandbox)
		n.forget(p)
	}
}

// TestLateDelLeavesHostSide (attack 34): DEL removed state/host-ports/<slot>.* before the slot
// claim check that guards the rest of the slot, so the DEL of an old sandbox that comes after its
// pod's sandbox was re-created, or after another pod got the slot, deleted the live port's host
// side: its data plane lost its configuration. A host side is removed only by the attachment its
// description names, which still takes its own stale one.
func TestLateDelLeavesHostSide(t *testing.T) {
	n := newNode(t, nodeOptions{})
	// The same pod, a new sandbox: the old sandbox's DEL comes last.
	a := n.newPod("a", "west", "", "slot-000")
	n.allocate(a)
	n.mustAdd(a)
	a.sandbox++
	n.mustAdd(a)
	n.mustDel(a, 0)
	n.assertHostSide(a, "slot-000")
	must(t, n.cni.CheckNetworkList(t.Context(), n.confList("memifnet"), n.rt(a, a.containerID())))

	// Another pod gets the slot for its host port; A's DEL comes after B's ADD.
	n.forget(a)
	b := n.newPod("b", "up", "", "slot-000")
	n.allocate(b)
	n.mustAdd(b)
	n.mustDel(a, 1)
	n.assertHostSide(b, "slot-000")

	// B's slot goes to C for a link port before B's DEL: B's DEL takes its own stale host side
	// (a data plane must not keep serving B's port in C's slot) and leaves C's port alone.
	n.forget(b)
	c := n.newPod("c", "east@l1", "", "slot-000")
	n.allocate(c)
	n.mustAdd(c)
	n.mustDel(b, 0)
	for _, f := range n.hostSide("slot-000") {
		if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("B's late DEL left its own stale host side %s: %v", f, err)
		}
	}
	if s := readSpec(t, filepath.Join(n.slotHost("slot-000"), names.PortFile)); s.Name != "east" {
		t.Fatalf("C's port.json: %+v", s)
	}
	must(t, n.cni.CheckNetworkList(t.Context(), n.confList("memifnet"), n.rt(c, c.containerID())))
	n.mustDel(c, 0)
}
