// Package cniattach is memif-cni's attachment record: what one ADD planned, written to
// <state>/state/attachments/<key>.json before its first side effect. memif-cni writes and undoes
// it (cmd/memif-cni/internal/state); the node agent reads it to label each port's metrics with
// its pod (cmd/memif-deviceplugin/internal/observe/portmetrics). One type for both, so that a field
// renamed here is renamed for the reader too.
package cniattach

import "github.com/memifnet/memifnet/internal/safefs"

// Subdir holds the records, under the CNI state directory (names.StoreSubdir): <key>.json and
// its <key>.lock.
const Subdir = "attachments"

// Attachment is what one ADD planned, written before its first side effect. DEL undoes each
// planned step whether or not ADD got that far; every undo step tolerates "already undone".
type Attachment struct {
	// Network is the CNI network name: GC for one network never touches another's attachments.
	Network     string `json:"network"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	PodUID      string `json:"podUID,omitempty"`
	Ports       []Port `json:"ports"`
	// DeviceInfoFile is the runtime's CNIDeviceInfoFile, if it gave one.
	DeviceInfoFile string `json:"deviceInfoFile,omitempty"`
}

// Port is one port's plan: its slot and what was made for it.
type Port struct {
	Name     string `json:"name"`
	Slot     string `json:"slot"`
	Link     string `json:"link,omitempty"`
	Mode     string `json:"mode"`
	Role     string `json:"role,omitempty"` // filled in once known
	IPAM     bool   `json:"ipam,omitempty"` // a delegated IPAM ADD is (or may be) holding an address
	DevInfo  string `json:"devInfo"`        // device-info file
	HostDesc string `json:"hostDesc,omitempty"`
	// SlotMount is the slot's tmpfs when ADD wrote into it. Undo touches the slot only while the
	// same tmpfs is there and the slot's claim is still this attachment's: a slot handed to
	// another pod since (a new tmpfs) or wired by a newer sandbox of this pod (a new claim) is
	// left alone.
	SlotMount safefs.Identity `json:"slotMount,omitzero"`
	// LinkMount is the link directory's tmpfs, recorded before ADD binds it on <slot>/link:
	// undo removes a mount there only if it shows this file system.
	LinkMount safefs.Identity `json:"linkMount,omitzero"`
}

// Key names an attachment the way CNI does: container ID and interface name.
func Key(containerID, ifName string) string { return containerID + "_" + ifName }
