package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/cmd/internal/cniattach"
)

// Attachment is what one ADD planned, written before its first side effect (the record's one
// definition is cmd/internal/cniattach: the node agent reads it too).
type Attachment = cniattach.Attachment

// Port is one port's plan: its slot and what was made for it.
type Port = cniattach.Port

// Key names an attachment the way CNI does: container ID and interface name.
func Key(containerID, ifName string) string { return cniattach.Key(containerID, ifName) }

// Store is the state directory.
type Store struct {
	Dir string
	// Boot identifies this boot of the node (/proc/sys/kernel/random/boot_id); records of links
	// made in another boot are stale. Empty disables the check.
	Boot string
}

func (s Store) attachmentPath(key string) string {
	return filepath.Join(s.Dir, cniattach.Subdir, key+".json")
}

// AnyAttachments reports whether the attachments directory exists. Without it no ADD left a
// record on this node, so a DEL has nothing to undo and must not make the directory (for its
// lock file) on a node an uninstall has just cleaned.
func (s Store) AnyAttachments() (bool, error) {
	_, err := os.Lstat(filepath.Join(s.Dir, cniattach.Subdir))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("attachments: %w", err)
	}
	return true, nil
}

// LockAttachment serialises ADD, DEL and GC of one attachment.
func (s Store) LockAttachment(key string) (*Lock, error) {
	return lock(filepath.Join(s.Dir, cniattach.Subdir, key+".lock"))
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
	ents, err := os.ReadDir(filepath.Join(s.Dir, cniattach.Subdir))
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
