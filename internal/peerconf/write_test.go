package peerconf

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestWriteSlotHostile plays the pod: before the ADD it plants symlinks (to a file of the node)
// at every name of the ready configs and a FIFO at one; the write replaces each with a regular
// file of the generated content and never writes through. A directory the pod leaves at a name
// is refused, as it is at port.json.
func TestWriteSlotHostile(t *testing.T) {
	node := t.TempDir()
	victim := filepath.Join(node, "victim")
	if err := os.WriteFile(victim, []byte("node file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	slotPath := filepath.Join(t.TempDir(), "slot-007")
	if err := os.Mkdir(slotPath, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"dpdk.args", "dpdk.app-args", "vpp.cli"} {
		if err := os.Symlink(victim, filepath.Join(slotPath, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := mkfifo(filepath.Join(slotPath, "port.env")); err != nil {
		t.Fatal(err)
	}
	slot, err := safefs.Open(slotPath)
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Close()
	spec := linkSpec()
	if err := WriteSlot(slot, spec); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "node file\n" {
		t.Fatalf("the node's file was written through a planted symlink: %q", b)
	}
	want, _ := Generate(Side{Spec: spec, Slot: "slot-007"})
	for n, content := range map[string]string{"dpdk.args": want.DPDKArgs, "dpdk.app-args": want.DPDKAppArgs, "vpp.cli": want.VPPCLI, "port.env": want.Env} {
		fi, err := os.Lstat(filepath.Join(slotPath, n))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
			t.Fatalf("%s: %v %v, want a regular 0644 file", n, fi.Mode(), err)
		}
		if b, _ := os.ReadFile(filepath.Join(slotPath, n)); string(b) != content {
			t.Errorf("%s = %q, want %q", n, b, content)
		}
	}

	// A later write for an ip port removes the DPDK files: no stale config stays.
	spec.Mode, spec.MAC = portspec.ModeIP, ""
	if err := WriteSlot(slot, spec); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, slotPath); len(got) != 2 || got[0] != "port.env" || got[1] != "vpp.cli" {
		t.Fatalf("slot holds %v after an ip port's write, want port.env and vpp.cli", got)
	}

	// The pod swaps the names for symlinks again: removal takes the links, not their targets.
	for _, n := range []string{"vpp.cli", "port.env"} {
		os.Remove(filepath.Join(slotPath, n))
		if err := os.Symlink(victim, filepath.Join(slotPath, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveSlot(slot); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, slotPath); len(got) != 0 {
		t.Fatalf("slot holds %v after RemoveSlot", got)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "node file\n" {
		t.Fatalf("the node's file after RemoveSlot: %q, %v", b, err)
	}

	// A directory is not replaced (it may hold anything): a clear refusal.
	if err := os.MkdirAll(filepath.Join(slotPath, "vpp.cli", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteSlot(slot, linkSpec()); !errors.Is(err, safefs.ErrRefused) {
		t.Fatalf("WriteSlot over a planted directory: %v, want a refusal", err)
	}
}

// TestWriteHost: the description and the host side's files land in host-ports, 0600 (they hold
// the secret); the description says the host's end and its owner; RemoveHost takes them all for
// that owner, and a second removal is no error.
func TestWriteHost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "host-ports")
	desc := filepath.Join(dir, "slot-003.json")
	pod := linkSpec()
	pod.Link, pod.Peer, pod.Socket = "", portspec.PeerHost, "/run/memifnet/slot-003/memif.sock"
	pod.Secret, pod.ZeroCopy = "s3cret", true
	host := hostOf("/var/lib/memifnet/sockets/slot-003/memif.sock", "slot-003")
	if err := WriteHost(desc, pod, host); err != nil {
		t.Fatal(err)
	}
	want := []string{"slot-003.dpdk.app-args", "slot-003.dpdk.args", "slot-003.env", "slot-003.json", "slot-003.vpp.cli"}
	if got := listDir(t, dir); !slices.Equal(got, want) {
		t.Fatalf("host-ports holds %v, want %v", got, want)
	}
	for _, n := range want {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want 0600", n, fi.Mode(), err)
		}
	}
	env := parseEnv(t, mustRead(t, filepath.Join(dir, "slot-003.env")))
	if env["MEMIF_SOCKET"] != host.Socket || env["MEMIF_ROLE"] != "server" || env["MEMIF_ZERO_COPY"] != "false" {
		t.Errorf("host env: %v", env)
	}
	if args := mustRead(t, filepath.Join(dir, "slot-003.dpdk.args")); !strings.Contains(args, ",role=server,") || !strings.Contains(args, ",zero-copy=no,") || strings.Contains(args, "--single-file-segments") {
		t.Errorf("host dpdk.args of a zero-copy pod: %q, want a copy-mode server", args)
	}
	var got HostPort
	dec := json.NewDecoder(strings.NewReader(mustRead(t, desc)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	wantDesc := HostPort{Socket: host.Socket, Role: "server", ID: pod.ID, Mode: pod.Mode, Secret: "s3cret", Queues: pod.Queues,
		RingSize: pod.RingSize, BufferSize: pod.BufferSize, Namespace: "ns", Pod: "p", Port: pod.Name, Owner: host.Owner}
	if got != wantDesc {
		t.Errorf("description %+v, want %+v", got, wantDesc)
	}
	for range 2 {
		if err := RemoveHost(desc, host.Owner, true); err != nil {
			t.Fatal(err)
		}
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Fatalf("host-ports holds %v after RemoveHost, want nothing", got)
	}
	if err := RemoveHost(filepath.Join(t.TempDir(), "gone", "slot-1.json"), host.Owner, true); err != nil {
		t.Fatalf("RemoveHost in a missing directory: %v", err)
	}
	// A pod end that serves gets no host side: nothing is written.
	pod.Role = portspec.RoleServer
	if err := WriteHost(desc, pod, host); err == nil || !strings.Contains(err.Error(), "always the server") {
		t.Fatalf("WriteHost for a serving pod end: %v, want a refusal", err)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Fatalf("a refused WriteHost left %v", got)
	}
}

// TestRemoveHostOnlyByItsOwner (docs/security.md row 34): the undo of another attachment (an old
// sandbox of the pod, a pod that had the slot before) leaves the live owner's host side whole,
// with ErrNotOwner, even when it believes the slot is its own; a description written before
// descriptions named their owner, and files a stopped write left without a description, are
// removed only by one whose records say the slot is its own.
func TestRemoveHostOnlyByItsOwner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host-ports")
	desc := filepath.Join(dir, "slot-003.json")
	pod := linkSpec()
	pod.Link, pod.Peer = "", portspec.PeerHost
	live := hostOf("/var/lib/memifnet/sockets/slot-003/memif.sock", "slot-003")
	live.Owner = Owner{ContainerID: "sandbox-2", IfName: "net1", PodUID: "u1"}
	if err := WriteHost(desc, pod, live); err != nil {
		t.Fatal(err)
	}
	all := listDir(t, dir)
	for _, old := range []Owner{
		{ContainerID: "sandbox-1", IfName: "net1", PodUID: "u1"}, // the pod's old sandbox
		{ContainerID: "sandbox-2", IfName: "net2", PodUID: "u1"}, // another network's attachment
		{ClaimUID: "c1"}, {},
	} {
		for _, mine := range []bool{false, true} {
			if err := RemoveHost(desc, old, mine); !errors.Is(err, ErrNotOwner) {
				t.Errorf("RemoveHost by %+v (slot its own: %v): %v, want ErrNotOwner", old, mine, err)
			}
			if got := listDir(t, dir); !slices.Equal(got, all) {
				t.Fatalf("RemoveHost by %+v left %v of %v", old, got, all)
			}
		}
	}
	// Written before the owner was recorded: the caller's own records decide.
	if err := os.WriteFile(desc, []byte(`{"socket":"/x","role":"server","pod":"p"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveHost(desc, live.Owner, false); !errors.Is(err, ErrNotOwner) || len(listDir(t, dir)) != len(all) {
		t.Fatalf("RemoveHost of a description without owner, slot not the caller's: %v, left %v", err, listDir(t, dir))
	}
	if err := RemoveHost(desc, live.Owner, true); err != nil || len(listDir(t, dir)) != 0 {
		t.Fatalf("RemoveHost of a description without owner: %v, left %v", err, listDir(t, dir))
	}
	// A write that stopped before the description.
	if err := os.WriteFile(filepath.Join(dir, "slot-003.vpp.cli"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveHost(desc, live.Owner, false); err != nil || len(listDir(t, dir)) != 1 {
		t.Fatalf("RemoveHost without a description, slot not the caller's: %v, left %v", err, listDir(t, dir))
	}
	if err := RemoveHost(desc, live.Owner, true); err != nil || len(listDir(t, dir)) != 0 {
		t.Fatalf("RemoveHost without a description: %v, left %v", err, listDir(t, dir))
	}
}

func mustRead(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mkfifo(path string) error { return unix.Mkfifo(path, 0o644) }
