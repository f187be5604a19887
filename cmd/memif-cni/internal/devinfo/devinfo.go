// Package devinfo writes NPWG device-info files (spec 1.1.0, type memif) for wired ports, so that
// Multus can publish them in the pod's network-status.
package devinfo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Version is the device-info spec version.
const Version = "1.1.0"

// Info is one device-info document.
type Info struct {
	Type    string `json:"type"`
	Version string `json:"version"`
	Memif   *Memif `json:"memif,omitempty"`
}

// Memif is the memif section. Role follows the spec, which means who creates the socket file,
// not the memif protocol role: "master" when the app in this pod creates it (the pod is the memif
// server), "slave" when someone else does (the host data plane, or the other pod of a link).
type Memif struct {
	Role string `json:"role"`
	Path string `json:"path"`
	Mode string `json:"mode"`
}

// SpecRole maps a memif role of the pod to the spec's role.
func SpecRole(memifRole string) string {
	if memifRole == "server" {
		return "master"
	}
	return "slave"
}

// SpecMode maps our mode names to the spec's (which spells punt-inject "inject-punt").
func SpecMode(mode string) string {
	if mode == "punt-inject" {
		return "inject-punt"
	}
	return mode
}

// Path is the CNI-side file of one port.
func Path(dir, containerID, ifName, port string) string {
	return filepath.Join(dir, "cni", fmt.Sprintf("memifnet-%s_%s-%s-device.json", containerID, ifName, port))
}

// Write replaces file with info.
func Write(file string, info Info) error {
	b, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encode device-info: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("device-info dir: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o444); err != nil {
		return fmt.Errorf("write device-info: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write device-info: %w", err)
	}
	return nil
}

// Remove deletes file; a missing file is fine.
func Remove(file string) error {
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove device-info: %w", err)
	}
	return nil
}
