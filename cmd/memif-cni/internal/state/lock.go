// Package state keeps memif-cni's records under <stateDir>/state: one record per attachment (what
// ADD planned and did, so DEL can undo it without asking anyone) and one per link (its members
// and their roles). Every read-modify-write runs under an flock, because the runtime runs one
// plugin process per pod and pods on the same link attach at the same time.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/safefs"
)

// Lock is an exclusive flock on a lock file.
type Lock struct{ f *os.File }

// lock takes an exclusive lock on path, creating it. A lock file may be removed by the holder
// (so that finished links leave nothing behind); a waiter that then wins the lock on the
// unlinked file sees that the path no longer names its inode and starts again.
func lock(path string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, fs.ErrNotExist) {
			// A last Leave removed the (then empty) directory since MkdirAll: make it again.
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, fmt.Errorf("lock %s: %w", path, err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := flock(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		var held, named unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &held); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := unix.Stat(path, &named); err == nil && named.Ino == held.Ino && named.Dev == held.Dev {
			return &Lock{f: f}, nil
		}
		f.Close()
	}
}

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Unlock releases the lock.
func (l *Lock) Unlock() { l.f.Close() }

// removeAndUnlock deletes the lock file while still holding it, then releases it.
func (l *Lock) removeAndUnlock() {
	_ = os.Remove(l.f.Name())
	l.f.Close()
}

// writeJSON replaces path atomically: a crash leaves the old or the new record, never half. The
// records describe mounts and tmpfs contents, which a machine crash loses too, so they are not
// fsynced.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := safefs.WriteFile(path, b, 0o600, safefs.WriteOptions{}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readJSON reads path into v; ok is false when the file does not exist.
func readJSON(path string, v any) (ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return true, nil
}
