package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// MaxLinkMembers is how many pods share a link: memif is point to point.
const MaxLinkMembers = 2

// Link is the record of one pod-to-pod link.
type Link struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	ID        uint32   `json:"id"`
	Mode      string   `json:"mode"`
	Secret    string   `json:"secret"`
	Members   []Member `json:"members"`
	// Mount is the link directory's tmpfs; Boot the boot it was made in (a record from an
	// earlier boot names a mount that is gone: the link starts afresh).
	Mount safefs.Identity `json:"mount"`
	Boot  string          `json:"boot,omitempty"`
}

// Member is one pod's end of a link.
type Member struct {
	Key  string `json:"key"` // attachment key
	Pod  string `json:"pod"`
	Port string `json:"port"`
	Role string `json:"role"`
}

// JoinRequest describes the port that wants to join.
type JoinRequest struct {
	Key, Pod, Port string
	Role           string // "" lets the link choose
	ID             uint32
	Mode           string
}

// LinkDirs makes and removes link directories (the plugin mounts a tmpfs for each); the store
// calls it under the link's lock, so a directory is never made or removed under a concurrent Join
// or Leave.
type LinkDirs interface {
	// Make gives the link a new, empty, world-writable directory.
	Make(ns, name string) (safefs.Identity, error)
	// Check says whether the link's directory is still the one Make returned.
	Check(ns, name string, mount safefs.Identity) error
	// Remove takes the directory away (the files in it go with it); a directory whose mount is
	// already gone (a reboot) is just removed.
	Remove(ns, name string, mount safefs.Identity) error
}

// ConflictError is a join the link cannot accept; Field names the annotation field at fault.
type ConflictError struct {
	Field, Msg string
}

func (e *ConflictError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Msg) }

func (s Store) linkPath(ns, name string) string {
	return filepath.Join(s.Dir, "links", ns, name+".json")
}

// Join adds a member to the link ns/name and returns the link and the member's role. The role
// is the port's own if it set one, else the opposite of the pod already there, else server: the
// first pod to attach listens, so the second finds a socket to dial. The first member makes the
// link's directory (dirs.Make), under the link's lock, so a concurrent last Leave cannot remove it
// under us. Joining twice with the same key is a no-op.
func (s Store) Join(ns, name string, dirs LinkDirs, r JoinRequest) (Link, string, error) {
	l, err := lock(filepath.Join(s.Dir, "links", ns, name+".lock"))
	if err != nil {
		return Link{}, "", err
	}
	defer l.Unlock()
	var ln Link
	found, err := readJSON(s.linkPath(ns, name), &ln)
	if err != nil {
		return Link{}, "", err
	}
	if found && s.Boot != "" && ln.Boot != s.Boot {
		found = false // made before the node rebooted: its mount and its pods are gone
	}
	if found {
		for _, m := range ln.Members {
			if m.Key == r.Key {
				return ln, m.Role, nil
			}
		}
	}
	role := r.Role
	members := 0
	if found {
		members = len(ln.Members)
	}
	switch members {
	case 0:
		role, _, _ = portspec.PairRoles(role, "") // the first to attach serves unless it asks otherwise
	case 1:
		other := ln.Members[0]
		_, want, ok := portspec.PairRoles(other.Role, role)
		switch {
		case !ok:
			return Link{}, "", &ConflictError{"role", fmt.Sprintf("link %q: pod %s (port %s) is already the %s", name, other.Pod, other.Port, other.Role)}
		case r.ID != ln.ID:
			return Link{}, "", &ConflictError{"id", fmt.Sprintf("link %q: %d differs from id %d of pod %s (port %s); both ends need the same id", name, r.ID, ln.ID, other.Pod, other.Port)}
		case r.Mode != ln.Mode:
			return Link{}, "", &ConflictError{"mode", fmt.Sprintf("link %q: %s differs from mode %s of pod %s (port %s)", name, r.Mode, ln.Mode, other.Pod, other.Port)}
		}
		role = want
	default:
		return Link{}, "", &ConflictError{"link", fmt.Sprintf("link %q already joins pods %s and %s; a link has at most %d pods", name, ln.Members[0].Pod, ln.Members[1].Pod, MaxLinkMembers)}
	}
	if !found {
		secret, err := ports.NewSecret()
		if err != nil {
			return Link{}, "", err
		}
		// The link takes the id and mode of its first member; a later member must agree.
		ln = Link{Namespace: ns, Name: name, ID: r.ID, Mode: r.Mode, Secret: secret, Boot: s.Boot}
		if ln.Mount, err = dirs.Make(ns, name); err != nil {
			return Link{}, "", fmt.Errorf("link %q: %w", name, err)
		}
	} else if err := dirs.Check(ns, name, ln.Mount); err != nil {
		return Link{}, "", fmt.Errorf("link %q: its directory is not the one memif-cni made for pod %s (%v); delete the link's pods and create them again", name, ln.Members[0].Pod, err)
	}
	ln.Members = append(ln.Members, Member{Key: r.Key, Pod: r.Pod, Port: r.Port, Role: role})
	if err := writeJSON(s.linkPath(ns, name), ln); err != nil {
		if len(ln.Members) == 1 {
			_ = dirs.Remove(ns, name, ln.Mount)
		}
		return Link{}, "", err
	}
	return ln, role, nil
}

// Leave removes key from the link. The last member to leave removes the link's directory (with
// the socket file in it), record and lock.
func (s Store) Leave(ns, name string, dirs LinkDirs, key string) error {
	l, err := lock(filepath.Join(s.Dir, "links", ns, name+".lock"))
	if err != nil {
		return err
	}
	var ln Link
	found, err := readJSON(s.linkPath(ns, name), &ln)
	if err != nil {
		l.Unlock()
		return err
	}
	kept := ln.Members[:0]
	for _, m := range ln.Members {
		if m.Key != key {
			kept = append(kept, m)
		}
	}
	ln.Members = kept
	if found && len(kept) > 0 {
		defer l.Unlock()
		return writeJSON(s.linkPath(ns, name), ln)
	}
	defer l.removeAndUnlock()
	if found {
		if err := dirs.Remove(ns, name, ln.Mount); err != nil {
			return fmt.Errorf("remove link dir: %w", err)
		}
	}
	if err := os.Remove(s.linkPath(ns, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove link record: %w", err)
	}
	// Best effort: the namespace directory goes when empty.
	_ = os.Remove(filepath.Dir(s.linkPath(ns, name)))
	return nil
}

// ReadLink returns the link's record.
func (s Store) ReadLink(ns, name string) (Link, bool, error) {
	var ln Link
	ok, err := readJSON(s.linkPath(ns, name), &ln)
	return ln, ok, err
}
