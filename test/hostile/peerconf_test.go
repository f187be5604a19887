package hostile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/names"
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
