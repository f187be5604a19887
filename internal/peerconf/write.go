package peerconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// slotFiles are the files of a slot, paired with their contents in f.
func slotFiles(f Files) [][2]string {
	return [][2]string{
		{names.DPDKArgsFile, f.DPDKArgs},
		{names.DPDKAppArgsFile, f.DPDKAppArgs},
		{names.VPPFile, f.VPPCLI},
		{names.EnvFile, f.Env},
	}
}

// hostFiles are the host side's files beside the description <slot>.json, paired with their
// contents in f.
func hostFiles(desc string, f Files) [][2]string {
	base := strings.TrimSuffix(filepath.Base(desc), ".json")
	return [][2]string{
		{base + "." + names.DPDKArgsFile, f.DPDKArgs},
		{base + "." + names.DPDKAppArgsFile, f.DPDKAppArgs},
		{base + "." + names.VPPFile, f.VPPCLI},
		{base + names.HostEnvSuffix, f.Env},
	}
}

// WriteSlot writes the pod side's files of spec into the slot it is wired to (the slot's name is
// the last element of slot's path), beside port.json and as port.json is written: atomically,
// never through anything the pod left there. A file the port gets none of (a mode or size the
// peer does not take) is removed, so no stale one stays. Readable by a non-root app, as port.json.
func WriteSlot(slot *safefs.Dir, spec portspec.PortSpec) error {
	f, err := Generate(Side{Spec: spec, Slot: filepath.Base(slot.Path())})
	if err != nil {
		return err
	}
	return apply(slot, slotFiles(f), 0o644)
}

// RemoveSlot removes the pod side's files from the slot; missing ones are no error.
func RemoveSlot(slot *safefs.Dir) error {
	return apply(slot, slotFiles(Files{}), 0)
}

// HostPort is a host port's description, <slot>.json beside the host side's files: for a host
// data plane (VPP, DPDK, a program of its own) that reads one JSON file rather than one of the
// ready configs. Role is the host's role, always the server; Socket is the socket as the node
// sees it. Owner is the attachment that wrote it: a data plane tells a re-created port by it (a
// new sandbox of the same pod has another container ID), and only that owner removes it.
type HostPort struct {
	Socket     string `json:"socket"`
	Role       string `json:"role"`
	ID         uint32 `json:"id"`
	Mode       string `json:"mode"`
	Secret     string `json:"secret,omitempty"`
	Queues     int    `json:"queues"`
	RingSize   int    `json:"ringSize"`
	BufferSize int    `json:"bufferSize"`
	Namespace  string `json:"namespace"`
	Pod        string `json:"pod"`
	Port       string `json:"port"`
	Owner      Owner  `json:"owner"`
}

// Owner is the attachment a host side belongs to: memif-cni's (the pod sandbox's container ID
// and the interface name, which name a CNI attachment, and the pod's UID) or the DRA driver's
// (the claim's UID). RemoveHost removes a host side only for its owner.
type Owner struct {
	ContainerID string `json:"containerID,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	PodUID      string `json:"podUID,omitempty"`
	ClaimUID    string `json:"claimUID,omitempty"`
}

// ErrNotOwner is RemoveHost's answer when the host side belongs to another attachment: it is
// left as it is.
var ErrNotOwner = errors.New("the host side belongs to another attachment")

// maxDesc bounds the description RemoveHost reads back (the agent wrote it; a few hundred bytes).
const maxDesc = 64 << 10

// hostPort is the description of the host side s.
func hostPort(s Side, o Owner) HostPort {
	ns, pod, _ := strings.Cut(s.Pod, "/")
	p := s.Spec
	return HostPort{Socket: p.Socket, Role: p.Role, ID: p.ID, Mode: p.Mode, Secret: p.Secret, Queues: p.Queues,
		RingSize: p.RingSize, BufferSize: p.BufferSize, Namespace: ns, Pod: pod, Port: p.Name, Owner: o}
}

// WriteHost writes the host side of the host port whose pod end is pod (HostSide: always the
// memif server in copy mode; a pod end that is not the client is refused): the description desc
// (state/host-ports/<slot>.json, in the agent's state directory, which no pod reaches) and the
// ready configs beside it, all with mode 0600 (they carry the secret). memif-cni and the DRA
// driver both write host ports through it. The description goes last and RemoveHost takes it
// first, so that a data plane which waits for <slot>.json finds the other files complete beside
// it.
func WriteHost(desc string, pod portspec.PortSpec, h Host) error {
	s, err := HostSide(pod, h)
	if err != nil {
		return err
	}
	f, err := Generate(s)
	if err != nil {
		return fmt.Errorf("host side of %s: %w", desc, err)
	}
	b, err := json.MarshalIndent(hostPort(s, h.Owner), "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", desc, err)
	}
	d, err := safefs.MkdirAllOpen(filepath.Dir(desc), 0o755)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := apply(d, hostFiles(desc, f), 0o600); err != nil {
		return err
	}
	return d.WriteFile(filepath.Base(desc), append(b, '\n'), 0o600, safefs.WriteOptions{})
}

// RemoveHost removes owner's host side: the description desc and the files beside it; missing
// ones are no error. A description of another owner is left with its files, and the error is
// ErrNotOwner: a late undo (the DEL of a sandbox re-created since, or of a pod whose slot went to
// another pod) must not take the live port's host side (docs/security.md row 34), while it still
// takes its own stale one. A description without an owner (written before descriptions named one)
// is removed only when slotIsOwners: the caller's own record of the slot (memif-cni's slot claim,
// the DRA driver's prepared claims) says the slot is still owner's; so are files without a
// description (a write that stopped before it). Call it under the lock its writer holds.
func RemoveHost(desc string, owner Owner, slotIsOwners bool) error {
	d, err := safefs.Open(filepath.Dir(desc))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	name := filepath.Base(desc)
	b, err := d.ReadFile(name, maxDesc)
	switch {
	case err == nil:
		var hp HostPort
		if err := json.Unmarshal(b, &hp); err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
		if hp.Owner != owner && (hp.Owner != Owner{} || !slotIsOwners) {
			return fmt.Errorf("%s: %w (%+v, not %+v)", desc, ErrNotOwner, hp.Owner, owner)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	case !slotIsOwners:
		return nil // no description: nothing says whose the files are
	}
	if err := d.Remove(name); err != nil {
		return err
	}
	return apply(d, hostFiles(desc, Files{}), 0)
}

// apply writes each file with content and removes each without.
func apply(d *safefs.Dir, files [][2]string, perm os.FileMode) error {
	var errs []error
	for _, nf := range files {
		name, content := nf[0], nf[1]
		var err error
		if content == "" {
			err = d.Remove(name)
		} else {
			err = d.WriteFile(name, []byte(content), perm, safefs.WriteOptions{})
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
