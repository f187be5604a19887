package hostile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// hostFile is a host file a pod must not reach (/etc/shadow, a kubelet config, ...).
type hostFile struct {
	path string
	data []byte
}

func (n *node) hostFile(name string) hostFile {
	n.t.Helper()
	f := hostFile{path: filepath.Join(n.root, "host", name), data: []byte("host secret " + name + "\n")}
	must(n.t, os.MkdirAll(filepath.Dir(f.path), 0o700))
	must(n.t, os.WriteFile(f.path, f.data, 0o600))
	return f
}

func (f hostFile) assertUntouched(t *testing.T) {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(f.path, &st))
	b, err := os.ReadFile(f.path)
	must(t, err)
	if !bytes.Equal(b, f.data) || st.Mode&0o7777 != 0o600 || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 {
		t.Fatalf("host file %s changed: %q mode %o uid %d", f.path, b, st.Mode, st.Uid)
	}
}

// hostMount is a host mount a pod must not cover or detach (/opt/cni/bin, another pod's volume,
// cgroupfs).
type hostMount struct {
	dir string
	id  safefs.Identity
}

func (n *node) hostMount(name string) hostMount {
	n.t.Helper()
	dir := filepath.Join(n.root, "host", name)
	must(n.t, os.MkdirAll(dir, 0o755))
	must(n.t, unix.Mount("host-"+name, dir, "tmpfs", 0, "size=64k"))
	must(n.t, os.WriteFile(filepath.Join(dir, "loopback"), []byte("#!/bin/sh\n# the node's own\n"), 0o755))
	return hostMount{dir: dir, id: mountID(n.t, dir)}
}

func mountID(t *testing.T, dir string) safefs.Identity {
	t.Helper()
	d, err := safefs.Open(dir)
	must(t, err)
	defer d.Close()
	id, err := d.Identity()
	must(t, err)
	return id
}

func (m hostMount) assertUntouched(t *testing.T) {
	t.Helper()
	if got := mountID(t, m.dir); got != m.id {
		t.Fatalf("host mount %s was covered or detached: %v, want %v", m.dir, got, m.id)
	}
	ents, err := os.ReadDir(m.dir)
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != "loopback" {
		t.Fatalf("host mount %s holds %v", m.dir, ents)
	}
	if testutil.MountSource(t, m.dir) != "host-"+filepath.Base(m.dir) {
		t.Fatalf("the top mount on %s is %q", m.dir, testutil.MountSource(t, m.dir))
	}
}

func readSpec(t *testing.T, path string) portspec.PortSpec {
	t.Helper()
	fi, err := os.Lstat(path)
	must(t, err)
	if !fi.Mode().IsRegular() {
		t.Fatalf("%s is %v, want a regular file", path, fi.Mode())
	}
	s, err := portspec.Read(path)
	must(t, err)
	return s
}

// TestAttackPortJSONSymlinks (attack 1): the pod plants port.json.tmp and port.json as symlinks
// to a host file, and a dangling one, then gets its sandbox re-created. memif-cni must neither
// write through them, nor chmod their targets, nor create a file where a dangling one points.
func TestAttackPortJSONSymlinks(t *testing.T) {
	n := newNode(t, nodeOptions{})
	shadow, kubeconf := n.hostFile("shadow"), n.hostFile("kubelet.conf")
	dangling := filepath.Join(n.root, "host", "created-by-pod")
	a := n.newPod("a", "west", "", "slot-000")
	n.allocate(a)
	n.mustAdd(a)
	pa := n.start(a, runAs{}, "")
	slot := "/run/memifnet/slot-000/"
	pa.must("symlink", shadow.path, slot+"port.json.tmp")
	pa.must("remove", slot+"port.json")
	pa.must("symlink", kubeconf.path, slot+"port.json")
	pa.must("symlink", dangling, slot+"memif.sock.tmp")
	pa.must("symlink", dangling, slot+".port.json.tmp-0000000000000000")

	must(t, n.recreateSandbox(a))
	shadow.assertUntouched(t)
	kubeconf.assertUntouched(t)
	if _, err := os.Lstat(dangling); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dangling symlink made memif-cni create %s: %v", dangling, err)
	}
	if s := readSpec(t, filepath.Join(n.slotHost("slot-000"), names.PortFile)); s.Name != "west" {
		t.Fatalf("port.json after the attack: %+v", s)
	}
	// What the pod sees is the new port.json, not its symlink.
	if got := pa.must("read", slot+"port.json"); !strings.Contains(got, `"name": "west"`) {
		t.Fatalf("the pod reads %q", got)
	}
	n.mustDel(a, a.sandbox)
}

// TestAttackLinkSymlink (attack 2): a pod with only a host port plants <slot>/link as a symlink to
// a host mount (the node's CNI bin dir), switches its annotation to a link port and gets its
// sandbox re-created. memif-cni must refuse the link, say why, and neither mount over the host
// directory nor (at DEL) unmount what the symlink names.
func TestAttackLinkSymlink(t *testing.T) {
	n := newNode(t, nodeOptions{})
	cniBin := n.hostMount("opt-cni-bin")
	a := n.newPod("a", "west", "", "slot-000")
	n.allocate(a)
	n.mustAdd(a)
	pa := n.start(a, runAs{}, "")
	pa.must("symlink", cniBin.dir, "/run/memifnet/slot-000/link")

	a.Annotation = "west@l1" // annotations are mutable on a running pod
	err := n.recreateSandbox(a)
	if err == nil {
		t.Fatal("ADD mounted a link over a planted symlink")
	}
	ce := cniError(t, err)
	if ce.Code != 103 || !strings.Contains(ce.Details, "slot-000/link") || !strings.Contains(ce.Details, "symlink") ||
		!strings.Contains(ce.Details, cniBin.dir) {
		t.Fatalf("refusal does not say what was refused: %v", ce)
	}
	cniBin.assertUntouched(t)

	// The link's other pod comes and goes; DEL of the refused sandbox finds nothing to undo.
	b := n.newPod("b", "east@l1", "", "slot-001")
	n.allocate(b)
	n.mustAdd(b)
	pb := n.start(b, runAs{}, "")
	pb.must("write", "/run/memifnet/slot-001/link/loopback", "#!/bin/sh\nevil\n")
	cniBin.assertUntouched(t)
	n.mustDel(a, a.sandbox)
	n.mustDel(a, a.sandbox) // DEL is idempotent
	n.mustDel(b, b.sandbox)
	cniBin.assertUntouched(t)
	if fi, err := os.Lstat(filepath.Join(n.slotHost("slot-000"), "link")); err != nil || fi.Mode().Type() != os.ModeSymlink {
		t.Fatalf("the pod's own symlink should be left to the slot's next scrub: %v %v", fi, err)
	}
}

// TestAttackCDIBind (attack 3): under CDI the runtime mounts the slot with the spec's options. With
// a plain bind (what the spec used to say), the container sees the slot without the link mounted
// on <slot>/link, so the pod can remove link/ and plant the symlink of attack 2 at any time; with
// rbind the link comes along and link/ cannot be removed.
func TestAttackCDIBind(t *testing.T) {
	n := newNode(t, nodeOptions{cdi: true})
	b, err := os.ReadFile(filepath.Join(n.cdiDir, "memifnet.io-socket.json"))
	must(t, err)
	var spec struct {
		Devices []struct {
			Name  string `json:"name"`
			Edits struct {
				Mounts []struct {
					HostPath      string   `json:"hostPath"`
					ContainerPath string   `json:"containerPath"`
					Options       []string `json:"options"`
				} `json:"mounts"`
			} `json:"containerEdits"`
		} `json:"devices"`
	}
	must(t, json.Unmarshal(b, &spec))
	a, peer := n.newPod("a", "west@l1", "", "slot-000"), n.newPod("peer", "east@l1", "", "slot-001")
	for _, p := range []*pod{a, peer} {
		n.allocate(p)
		n.mustAdd(p)
	}
	if len(a.mounts) != 0 || len(a.cdiDevices) != 1 || a.cdiDevices[0] != "memifnet.io/socket=slot-000" {
		t.Fatalf("Allocate under CDI: mounts %v, CDI devices %v", a.mounts, a.cdiDevices)
	}
	// Play the runtime: apply the spec's mounts of each pod's slot.
	for i, p := range []*pod{a, peer} {
		m := spec.Devices[i].Edits.Mounts[0]
		if spec.Devices[i].Name != p.Slots[0] || !contains(m.Options, "rbind") {
			t.Fatalf("CDI mount of %s: %+v, want rbind", p.Slots[0], m)
		}
		p.mounts = [][2]string{{m.HostPath, m.ContainerPath}}
	}
	pp := n.start(peer, runAs{}, "")
	pp.must("write", "/run/memifnet/slot-001/link/memif.sock", "server socket stands here")
	for _, mode := range []string{"--rbind", "--bind"} {
		pa := n.start(a, runAs{}, mode)
		_, rmErr := pa.do("rmdir", "/run/memifnet/slot-000/link")
		seen, readErr := pa.do("read", "/run/memifnet/slot-000/link/memif.sock")
		if mode == "--rbind" {
			if readErr != nil || seen != "server socket stands here" {
				t.Fatalf("with rbind the pod does not see its link: %q %v", seen, readErr)
			}
			if rmErr == nil || !strings.Contains(rmErr.Error(), "busy") {
				t.Fatalf("with rbind the pod removed link/: %v", rmErr)
			}
		} else if rmErr != nil || readErr == nil {
			// The attack this test guards against: bind alone hid the link and left link/ removable.
			t.Fatalf("negative control: with a plain bind the pod should see an empty, removable link/ (%v, %v)", rmErr, readErr)
		}
		pa.exit()
		if mode == "--bind" {
			// Worse: removing a directory that is a mount point only in other namespaces detaches
			// those mounts (Linux >= 3.18), so the pod took the link mount off the node, and could
			// now plant the symlink of attack 2.
			if _, mounted, _ := mustOpen(t, n.slotHost("slot-000")).MountAt("link"); mounted {
				t.Fatal("negative control: the node's link mount should be gone")
			}
		}
	}
	n.mustDel(a, 0)
	n.mustDel(peer, 0)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mustOpen(t *testing.T, dir string) *safefs.Dir {
	t.Helper()
	d, err := safefs.Open(dir)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// TestAttackFdsAcrossScrub (attacks 4 and 6): pod A keeps descriptors of its slot and its pool
// unit (and a mapping of the unit), passes them to its link peer P over a socket in their link
// directory, re-modes and re-owns its unit, and leaves. The slot and the unit go to pod B. Through
// what they kept, A's leftovers must not read B's port.json (its link secret), plant files or a
// socket in B's slot, read or write B's packet memory, make B's mapping fault by truncating, lock
// B out of its unit, or leave B a unit B cannot open.
func TestAttackFdsAcrossScrub(t *testing.T) {
	n := newNode(t, nodeOptions{})
	a := n.newPod("a", "west@l1", "hugepool-n0-000", "slot-000")
	peer := n.newPod("peer", "east@l1", "", "slot-001")
	for _, p := range []*pod{a, peer} {
		n.allocate(p)
		n.mustAdd(p)
	}
	pa, pp := n.start(a, runAs{}, ""), n.start(peer, runAs{}, "")
	unitPath := "/run/memifnet/pools/hugepool-n0-000"
	pa.must("open", "slot", "/run/memifnet/slot-000", "dir")
	pa.must("open", "unit", unitPath, "rdwr")
	pa.must("mmap", "unit", strconv.Itoa(4<<20))
	pa.must("mapwrite", "unit", "0", "tenant A")
	pa.must("fchmod", "unit", "000")
	pa.must("fchown", "unit", "65532", "65532")
	pp.must("listen", "/run/memifnet/slot-001/link/fd.sock")
	for _, fd := range []string{"slot", "unit"} {
		done := make(chan error, 1)
		go func() { _, err := pp.do("recvfd", fd); done <- err }()
		pa.must("sendfd", fd, "/run/memifnet/slot-000/link/fd.sock")
		must(t, <-done)
	}
	pp.must("mmap", "unit", strconv.Itoa(4<<20))

	// A is deleted; the kubelet hands its slot and unit to B.
	n.mustDel(a, 0)
	pa.exit()
	n.forget(a)
	b := n.newPod("b", "west@l2", "hugepool-n0-000", "slot-000")
	n.allocate(b)
	n.mustAdd(b)
	pb := n.start(b, runAs{uid: 65532}, "")
	bSpec := readSpec(t, filepath.Join(n.slotHost("slot-000"), names.PortFile))
	pb.must("open", "unit", unitPath, "rdwr")
	pb.must("flock", "unit") // A's lock on its old unit does not reach B's
	pb.must("mmap", "unit", strconv.Itoa(4<<20))
	if sum := pb.must("mapsum", "unit"); sum != "0" {
		t.Fatalf("tenant B's new unit is not zero (sum %s)", sum)
	}
	pb.must("mapwrite", "unit", "1024", "tenant B packets")

	// A's leftovers, held by P.
	if got, err := pp.do("readat", "slot", names.PortFile); err == nil && strings.Contains(got, bSpec.Secret) {
		t.Fatalf("through A's kept slot fd the peer reads B's port.json: %q", got)
	}
	pp.must("symlinkat", "slot", "link2", "/etc")
	pp.must("writeat", "slot", "memif.sock", "a fake socket")
	pp.must("mkdirat", "slot", "planted")
	ents, err := os.ReadDir(n.slotHost("slot-000"))
	must(t, err)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != "dpdk.app-args,dpdk.args,link,port.env,port.json,vpp.cli" { // what ADD wrote for B, nothing of A's
		t.Fatalf("B's slot holds %v", got)
	}
	if s := pp.must("mapread", "unit", "1024", "16"); s == "tenant B packets" {
		t.Fatal("through A's kept mapping the peer reads B's packet memory")
	}
	pp.must("mapwrite", "unit", "1024", "XXXXXXXXXXXXXXXX")
	pp.must("ftruncate", "unit", "0")
	pp.must("fchmod", "unit", "000")
	if s := pb.must("mapread", "unit", "1024", "16"); s != "tenant B packets" {
		t.Fatalf("B's packet memory changed: %q", s)
	}
	pb.must("mapsum", "unit") // reads every page: a truncated unit would SIGBUS the pod
	var st unix.Stat_t
	must(t, unix.Stat(n.unitHost("hugepool-n0-000"), &st))
	if st.Mode&0o7777 != 0o666 || st.Uid != 0 || st.Gid != 0 || st.Size != 4<<20 {
		t.Fatalf("B's unit: mode %o owner %d:%d size %d", st.Mode&0o7777, st.Uid, st.Gid, st.Size)
	}
	n.mustDel(b, 0)
	n.mustDel(peer, 0)
}

// TestLateDelLeavesNewOwnerAlone: a DEL that arrives after its slot went to another pod (or after
// the same pod's sandbox was re-created, which does not re-allocate) must not take the new
// owner's port.json or link mount.
func TestLateDelLeavesNewOwnerAlone(t *testing.T) {
	n := newNode(t, nodeOptions{})
	check := func(p *pod) {
		t.Helper()
		if s := readSpec(t, filepath.Join(n.slotHost(p.Slots[0]), names.PortFile)); s.Name != strings.Split(p.Annotation, "@")[0] {
			t.Fatalf("%s's port.json: %+v", p.Name, s)
		}
		if _, mounted, err := mustOpen(t, n.slotHost(p.Slots[0])).MountAt(names.LinkSubdir); err != nil || !mounted {
			t.Fatalf("%s's link is no longer mounted: %v", p.Name, err)
		}
		must(t, n.cni.CheckNetworkList(t.Context(), n.confList("memifnet"), n.rt(p, p.containerID())))
	}
	// The same pod, a new sandbox: the old sandbox's DEL comes last.
	a := n.newPod("a", "west@l1", "", "slot-000")
	n.allocate(a)
	n.mustAdd(a)
	a.sandbox++
	n.mustAdd(a)
	n.mustDel(a, 0)
	check(a)

	// Another pod gets the slot; A's DEL comes after B's ADD.
	n.forget(a)
	b := n.newPod("b", "east@l2", "", "slot-000")
	n.allocate(b)
	n.mustAdd(b)
	n.mustDel(a, 1)
	check(b)
	n.mustDel(b, 0)
}

// TestGCOnlyItsOwnNetwork (attack 5): GC for one network (a Multus NetworkAttachmentDefinition,
// say) must not remove another network's live attachments.
func TestGCOnlyItsOwnNetwork(t *testing.T) {
	n := newNode(t, nodeOptions{})
	x, y := n.newPod("x", "west@l1", "", "slot-000"), n.newPod("y", "east@l1", "", "slot-001")
	n.allocate(x)
	n.allocate(y)
	must(t, n.addOn("net-a", x))
	must(t, n.addOn("net-b", y))
	// GC of net-a that knows no attachment at all.
	must(t, n.cni.GCNetworkList(t.Context(), n.confList("net-a"), nil))
	if _, err := os.Stat(filepath.Join(n.slotHost("slot-000"), names.PortFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("GC of net-a left x's port.json: %v", err)
	}
	if s := readSpec(t, filepath.Join(n.slotHost("slot-001"), names.PortFile)); s.Name != "east" {
		t.Fatalf("GC of net-a touched y of net-b: %+v", s)
	}
	if _, mounted, err := mustOpen(t, n.slotHost("slot-001")).MountAt(names.LinkSubdir); err != nil || !mounted {
		t.Fatalf("GC of net-a unmounted y's link: %v", err)
	}
	must(t, n.cni.CheckNetworkList(t.Context(), n.confList("net-b"), n.rt(y, y.containerID())))
}

// TestSlotAndLinkQuotas: a pod filling its slot or its link directory hits the tmpfs limits
// (slotLimits, linkLimits), not the node's disk.
func TestSlotAndLinkQuotas(t *testing.T) {
	n := newNode(t, nodeOptions{})
	a := n.newPod("a", "west@l1", "", "slot-000")
	n.allocate(a)
	n.mustAdd(a)
	pa := n.start(a, runAs{uid: 65532}, "")
	for _, tc := range []struct {
		cmd, path string
		most      int
	}{
		{"fill", "/run/memifnet/slot-000/big", 256 << 10},
		{"fillinodes", "/run/memifnet/slot-000", 32},
		{"fill", "/run/memifnet/slot-000/link/big", 64 << 10},
		{"fillinodes", "/run/memifnet/slot-000/link", 16},
	} {
		res := pa.must(tc.cmd, tc.path)
		count, msg, _ := strings.Cut(res, " ")
		got, _ := strconv.Atoi(count)
		if !strings.Contains(msg, "no space left") || got > tc.most {
			t.Fatalf("%s %s: %s, want ENOSPC within %d", tc.cmd, tc.path, res, tc.most)
		}
		t.Logf("%s %s: stopped at %d (%s)", tc.cmd, tc.path, got, msg)
	}
	// What the pod wrote is in the slot's and the link's own file systems, which are full.
	for _, dir := range []string{n.slotHost("slot-000"), filepath.Join(n.slotHost("slot-000"), names.LinkSubdir)} {
		var st unix.Statfs_t
		must(t, unix.Statfs(dir, &st))
		if st.Type != unix.TMPFS_MAGIC || st.Bavail != 0 && st.Ffree != 0 {
			t.Fatalf("%s: type %#x, %d blocks and %d inodes free: the pod's writes went elsewhere", dir, st.Type, st.Bavail, st.Ffree)
		}
	}
	n.mustDel(a, 0)
}
