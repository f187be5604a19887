package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memifnet/memifnet/internal/safefs"
)

// Claim is what the driver remembers of a claim it prepared: enough to answer a repeated Prepare
// with the same result and to undo everything in Unprepare, which the kubelet calls with the
// claim's UID, namespace and name only (the claim may be gone by then), possibly after the node
// agent restarted.
type Claim struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Prepared is false while Prepare is still working: an Unprepare (or a later Prepare)
	// of such a claim undoes what was done.
	Prepared bool `json:"prepared"`
	// Devices are the claim's devices on this node, in allocation order.
	Devices []Device `json:"devices"`
	// LinkDir is the link's directory under <state>/dra/links/<namespace>/, and LinkMount its
	// tmpfs, when the claim is a link.
	LinkDir   string          `json:"linkDir,omitempty"`
	LinkMount safefs.Identity `json:"linkMount,omitzero"`
}

// Device is one allocated device of a claim.
type Device struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Name    string `json:"name"`
	// Kind is "socket" or "hugepage".
	Kind string `json:"kind"`
	// Port is the port wired into a socket slot (name, role, socket in the container).
	Port *PortStatus `json:"port,omitempty"`
}

// PortStatus is what the claim's status reports for a socket device, and what a pod finds in
// port.json.
type PortStatus struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Socket string `json:"socket"`
	Link   string `json:"link,omitempty"`
	// HostSocket is a host port's socket as the node sees it, for the host data plane.
	HostSocket string `json:"hostSocket,omitempty"`
}

// checkpoint is the file of prepared claims, <state>/dra/claims.json, written atomically and
// durably under a directory no pod can reach.
type checkpoint struct {
	path string
}

type checkpointFile struct {
	Version int     `json:"version"`
	Claims  []Claim `json:"claims"`
}

func (c checkpoint) load() (map[string]Claim, error) {
	out := map[string]Claim{}
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

func (c checkpoint) save(claims map[string]Claim) error {
	f := checkpointFile{Version: 1, Claims: []Claim{}}
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
