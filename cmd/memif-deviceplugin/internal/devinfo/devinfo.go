// Package devinfo writes NPWG device-info files (spec 1.1.0, type memif) for
// allocated socket slots, so that Multus and the CNI can find them.
package devinfo

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultDir is where device plugins put their files (device-info spec).
const DefaultDir = "/var/run/k8s.cni.cncf.io/devinfo/dp"

// Version is the device-info spec version written.
const Version = "1.1.0"

// Info is the JSON document of one device.
type Info struct {
	Type    string `json:"type"`
	Version string `json:"version"`
	Memif   *Memif `json:"memif,omitempty"`
}

// Memif is the memif section. Role follows the spec: who creates the socket
// file ("master": the app in the container, "slave": the host). The CNI
// knows the real port and updates its own copy; the plugin writes a
// placeholder that is right for host ports served from the host side.
type Memif struct {
	Role string `json:"role"`
	Path string `json:"path"`
	Mode string `json:"mode"`
}

// Writer writes files into one directory.
type Writer struct {
	Dir string
}

// Path is the file of one device: <resource with / as ->-<id>-device.json.
func (w Writer) Path(resource, id string) string {
	return filepath.Join(w.Dir, strings.ReplaceAll(resource, "/", "-")+"-"+id+"-device.json")
}

// WriteMemif writes the file for a slot whose socket is at containerPath.
// An older file is replaced: the spec's readers refuse to overwrite, and the
// previous tenant's file must not survive.
func (w Writer) WriteMemif(resource, id, containerPath string) error {
	b, err := json.Marshal(Info{Type: "memif", Version: Version, Memif: &Memif{Role: "slave", Path: containerPath, Mode: "ethernet"}})
	if err != nil {
		return fmt.Errorf("encode device-info: %w", err)
	}
	if err := os.MkdirAll(w.Dir, 0o755); err != nil {
		return fmt.Errorf("device-info dir: %w", err)
	}
	p := w.Path(resource, id)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o444); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write device-info: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write device-info: %w", err)
	}
	return nil
}

// Remove deletes the file of a device; a missing file is fine.
func (w Writer) Remove(resource, id string) error {
	if err := os.Remove(w.Path(resource, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove device-info: %w", err)
	}
	return nil
}
