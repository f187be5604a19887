package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/internal/safefs"
)

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

// Store is the state directory.
type Store struct {
	Dir string
	// Boot identifies this boot of the node (/proc/sys/kernel/random/boot_id); records of links
	// made in another boot are stale. Empty disables the check.
	Boot string
}

func (s Store) attachmentPath(key string) string {
	return filepath.Join(s.Dir, "attachments", key+".json")
}

// LockAttachment serialises ADD, DEL and GC of one attachment.
func (s Store) LockAttachment(key string) (*Lock, error) {
	return lock(filepath.Join(s.Dir, "attachments", key+".lock"))
}

// ReadAttachment returns the record; ok is false if there is none.
func (s Store) ReadAttachment(key string) (a Attachment, ok bool, err error) {
	ok, err = readJSON(s.attachmentPath(key), &a)
	return a, ok, err
}

// WriteAttachment stores the record. Call with the attachment's lock held.
func (s Store) WriteAttachment(a Attachment) error {
	return writeJSON(s.attachmentPath(Key(a.ContainerID, a.IfName)), a)
}

// RemoveAttachment deletes the record and its lock file. Call with the lock held; it is
// released.
func (s Store) RemoveAttachment(key string, l *Lock) error {
	err := os.Remove(s.attachmentPath(key))
	l.removeAndUnlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove attachment record: %w", err)
	}
	return nil
}

// Attachments lists the keys of all records.
func (s Store) Attachments() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.Dir, "attachments"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list attachments: %w", err)
	}
	var keys []string
	for _, e := range ents {
		if k, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			keys = append(keys, k)
		}
	}
	return keys, nil
}
