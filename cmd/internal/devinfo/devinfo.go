// Package devinfo reads and writes NPWG device-info files (spec 1.1.0, type memif): the device
// plugin writes one per allocated socket slot, memif-cni one per wired port, so that Multus can
// publish them in the pod's network-status.
package devinfo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/internal/safefs"
)

// DefaultDir is where device plugins put their files (device-info spec); the CNI's go to the
// sibling directory "cni".
const DefaultDir = "/var/run/k8s.cni.cncf.io/devinfo/dp"

// Version is the device-info spec version written.
const Version = "1.1.0"

// Info is one device-info document.
type Info struct {
	Type    string `json:"type"`
	Version string `json:"version"`
	Memif   *Memif `json:"memif,omitempty"`
}

// Memif is the memif section. Role follows the spec, which means who creates the socket file, not
// the memif protocol role: "master" when the app in this pod creates it (the pod is the memif
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

// CNIPath is memif-cni's file for one port (dir is the device-info root, above "dp" and "cni").
func CNIPath(dir, containerID, ifName, port string) string {
	return filepath.Join(dir, "cni", fmt.Sprintf("memifnet-%s_%s-%s-device.json", containerID, ifName, port))
}

// Write replaces file with info, atomically: an older file is replaced, since the spec's readers
// refuse to overwrite and a previous tenant's file must not survive.
func Write(file string, info Info) error {
	b, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encode device-info: %w", err)
	}
	if err := safefs.WriteFile(file, b, 0o444, safefs.WriteOptions{}); err != nil {
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

// Writer writes the device plugin's files into one directory.
type Writer struct {
	Dir string
}

// Path is the file of one device: <resource with / as ->-<id>-device.json.
func (w Writer) Path(resource, id string) string {
	return filepath.Join(w.Dir, strings.ReplaceAll(resource, "/", "-")+"-"+id+"-device.json")
}

// WriteMemif writes the file for a slot whose socket is at containerPath. The device plugin does
// not know the port yet, so it writes a placeholder right for host ports (the host creates the
// socket); memif-cni writes the real description in its own file.
func (w Writer) WriteMemif(resource, id, containerPath string) error {
	return Write(w.Path(resource, id), Info{Type: "memif", Version: Version,
		Memif: &Memif{Role: "slave", Path: containerPath, Mode: "ethernet"}})
}

// Remove deletes the file of a device; a missing file is fine.
func (w Writer) Remove(resource, id string) error { return Remove(w.Path(resource, id)) }
