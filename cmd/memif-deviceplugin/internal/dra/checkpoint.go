package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/cmd/internal/draattr"
	"github.com/memifnet/memifnet/internal/safefs"
)

// PreparedClaim is what the driver remembers of a claim it prepared: enough to answer a repeated Prepare
// with the same result and to undo everything in Unprepare, which the kubelet calls with the
// claim's UID, namespace and name only (the claim may be gone by then), possibly after the node
// agent restarted.
type PreparedClaim struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Prepared is false while Prepare is still working: an Unprepare (or a later Prepare)
	// of such a claim undoes what was done.
	Prepared bool `json:"prepared"`
	// Devices are the claim's devices on this node, in allocation order.
	Devices []PreparedDevice `json:"devices"`
	// LinkDir is the link's directory under <state>/dra/links/<namespace>/, and LinkMount its
	// tmpfs, when the claim is a link.
	LinkDir   string          `json:"linkDir,omitempty"`
	LinkMount safefs.Identity `json:"linkMount,omitzero"`
}

// PreparedDevice is one allocated device of a claim.
type PreparedDevice struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Name    string `json:"name"`
	// Kind is "socket" or "hugepage".
	Kind string `json:"kind"`
	// Status is the port wired into a socket slot, as the claim's status reports it.
	Status *PortStatus `json:"port,omitempty"`
	// Network is the port as the standard networkData of its status entry (KEP-4817: interface
	// name, MAC, addresses), what DRANET and the SR-IOV DRA driver report for theirs.
	Network *resourceapi.NetworkDeviceData `json:"networkData,omitempty"`
}

// PortStatus is a socket device's port: the data of its entry in the claim's status.devices,
// a contract with kubectl-memifnet (cmd/internal/draattr), and what the checkpoint keeps of it.
type PortStatus = draattr.PortStatus

// checkpoint is the file of prepared claims, <state>/dra/claims.json, written atomically and
// durably under a directory no pod can reach.
type checkpoint struct {
	path string
}

type checkpointFile struct {
	Version int             `json:"version"`
	Claims  []PreparedClaim `json:"claims"`
}

func (c checkpoint) load() (map[string]PreparedClaim, error) {
	out := map[string]PreparedClaim{}
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	var f checkpointFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", c.path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("checkpoint %s: version %d, want 1", c.path, f.Version)
	}
	for _, cl := range f.Claims {
		out[cl.UID] = cl
	}
	return out, nil
}

func (c checkpoint) save(claims map[string]PreparedClaim) error {
	f := checkpointFile{Version: 1, Claims: []PreparedClaim{}}
	for _, cl := range claims {
		f.Claims = append(f.Claims, cl)
	}
	sortClaims(f.Claims)
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	if err := safefs.WriteFile(c.path, append(b, '\n'), 0o600, safefs.WriteOptions{Durable: true}); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
