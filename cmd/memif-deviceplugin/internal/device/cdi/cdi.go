// Package cdi writes Container Device Interface spec files, the modern
// alternative to returning mounts from Allocate: the runtime reads the spec
// and the plugin returns only device names.
package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/internal/safefs"
)

// DefaultDir is the runtimes' default spec directory.
const DefaultDir = "/var/run/cdi"

// Version is the CDI spec version written; 0.5.0 is what containerd 1.7
// and CRI-O 1.28 understand.
const Version = "0.5.0"

// Spec is a CDI spec file.
type Spec struct {
	Version string   `json:"cdiVersion"`
	Kind    string   `json:"kind"`
	Devices []Device `json:"devices"`
}

// Device is one named device.
type Device struct {
	Name  string `json:"name"`
	Edits Edits  `json:"containerEdits"`
}

// Edits are the changes a device makes to a container.
type Edits struct {
	Env    []string `json:"env,omitempty"` // KEY=VALUE
	Mounts []Mount  `json:"mounts,omitempty"`
}

// Mount is a bind mount.
type Mount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Options       []string `json:"options,omitempty"`
}

// Writer writes specs into Dir.
type Writer struct {
	Dir string
}

// QualifiedName is how Allocate names a device: <kind>=<name>.
func QualifiedName(kind, name string) string { return kind + "=" + name }

// Write saves the spec of kind, replacing an older one atomically.
func (w Writer) Write(s Spec) error {
	return w.WriteNamed(strings.ReplaceAll(s.Kind, "/", "-"), s)
}

// WriteNamed saves the spec as <Dir>/<name>.json, replacing an older one atomically: a driver
// that writes one spec per claim (DRA) names the file after the claim.
func (w Writer) WriteNamed(name string, s Spec) error {
	s.Version = Version
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cdi spec: %w", err)
	}
	p := filepath.Join(w.Dir, name+".json")
	if err := safefs.WriteFile(p, b, 0o644, safefs.WriteOptions{Durable: true}); err != nil {
		return fmt.Errorf("write cdi spec: %w", err)
	}
	return nil
}

// Remove deletes <Dir>/<name>.json; a missing file is not an error.
func (w Writer) Remove(name string) error {
	if err := os.Remove(filepath.Join(w.Dir, name+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cdi spec: %w", err)
	}
	return nil
}
