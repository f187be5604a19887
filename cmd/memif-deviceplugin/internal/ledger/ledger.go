// Package ledger remembers which devices were handed out and not yet
// scrubbed, across plugin restarts. A device that is not in the ledger is
// clean; one that is may be in use by a pod and must be scrubbed before it
// is handed out again.
package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Entry is one dirty device.
type Entry struct {
	// AllocatedAt is when the device was last handed out; zero when not
	// known (first start, or a lost state file).
	AllocatedAt time.Time `json:"allocatedAt"`
}

type file struct {
	Version int              `json:"version"`
	Dirty   map[string]Entry `json:"dirty"`
}

// Ledger is safe for concurrent use.
type Ledger struct {
	mu    sync.Mutex
	path  string
	dirty map[string]Entry
}

// Open loads the ledger at path. Without a readable file every device in
// ids counts as dirty: a plugin that lost its memory must not hand out a
// slot that a running pod may still hold without scrubbing it first, and
// must not scrub it while the pod may use it. The reason is empty when the
// file was loaded, else it says why every device counts as dirty.
func Open(path string, ids []string) (l *Ledger, reason string) {
	l = &Ledger{path: path, dirty: map[string]Entry{}}
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	b, err := os.ReadFile(path)
	var f file
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		for _, id := range ids {
			l.dirty[id] = Entry{}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return l, "no state file " + path + ", all devices count as dirty"
		}
		return l, fmt.Sprintf("state file %s unreadable, all devices count as dirty: %v", path, err)
	}
	for id, e := range f.Dirty {
		if known[id] {
			l.dirty[id] = e
		}
	}
	return l, ""
}

// Dirty says whether id needs a scrub before it is handed out.
func (l *Ledger) Dirty(id string) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.dirty[id]
	return e, ok
}

// DirtyIDs lists the dirty devices.
func (l *Ledger) DirtyIDs() map[string]Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Entry, len(l.dirty))
	for id, e := range l.dirty {
		out[id] = e
	}
	return out
}

// Allocated marks ids as handed out at t and saves the ledger.
func (l *Ledger) Allocated(ids []string, t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.dirty[id] = Entry{AllocatedAt: t}
	}
	return l.saveLocked()
}

// Clean marks id scrubbed, unless it was handed out again after since
// (then the scrub raced with an Allocate and the device is in use). It does
// not save; call Save after a batch.
func (l *Ledger) Clean(id string, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.dirty[id]; ok && e.AllocatedAt.After(since) {
		return
	}
	delete(l.dirty, id)
}

// Save writes the ledger atomically (temp file and rename). There is no
// fsync: after a power loss the node reboots and no pod survives anyway.
func (l *Ledger) Save() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.saveLocked()
}

func (l *Ledger) saveLocked() error {
	b, err := json.Marshal(file{Version: 1, Dirty: l.dirty})
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}
