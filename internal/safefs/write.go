package safefs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// WriteOptions adjust WriteFile.
type WriteOptions struct {
	// Durable fsyncs the file before the rename and the directory after it, for writes a
	// machine crash must not lose (a CNI configuration list, the device plugin's ledger).
	// Records that describe mounts and tmpfs contents, which do not survive a reboot either,
	// need not be durable.
	Durable bool
	// Owner sets the file's owner (uid, gid) when non-nil; by default the file belongs to the
	// writer (root for the node agents).
	Owner *Owner
}

// Owner is a uid and gid.
type Owner struct{ UID, GID int }

// WriteFile replaces name (one component) in d with data atomically: readers see the old
// content or the new, never a mix. The temp file has a random name and is created O_EXCL, so a
// planted file or symlink of any name is never written through; mode and owner are set on the
// temp file's fd; renameat within d then replaces whatever name was (a symlink is replaced, not
// followed). A directory at name is refused. The temp file is removed on every failure.
func (d *Dir) WriteFile(name string, data []byte, perm os.FileMode, opts WriteOptions) error {
	if err := checkName(name, false); err != nil {
		return err
	}
	tmp, f, err := d.createTemp(name)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = unix.Unlinkat(d.fd, tmp, 0)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("safefs: write %s: %w", d.join(name), err)
	}
	if err := f.Chmod(perm.Perm()); err != nil {
		return fmt.Errorf("safefs: chmod %s: %w", d.join(name), err)
	}
	if opts.Owner != nil {
		if err := f.Chown(opts.Owner.UID, opts.Owner.GID); err != nil {
			return fmt.Errorf("safefs: chown %s: %w", d.join(name), err)
		}
	}
	if opts.Durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("safefs: sync %s: %w", d.join(name), err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("safefs: write %s: %w", d.join(name), err)
	}
	if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
		_ = unix.Unlinkat(d.fd, tmp, 0)
		ok = true // f is closed and tmp removed
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return refused(d.join(name), "it is a directory")
		}
		return &os.LinkError{Op: "rename", Old: d.join(tmp), New: d.join(name), Err: err}
	}
	ok = true
	if opts.Durable {
		return d.Sync()
	}
	return nil
}

// createTemp makes a new file named ".<name>.tmp-<random>" in d. The leading dot keeps it out of
// globs and out of the kubelet's static pod directory scan.
func (d *Dir) createTemp(name string) (string, *os.File, error) {
	for range 16 {
		var rnd [8]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return "", nil, fmt.Errorf("safefs: temp name: %w", err)
		}
		tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
		if len(tmp) > 255 {
			tmp = ".tmp-" + hex.EncodeToString(rnd[:])
		}
		fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", nil, &os.PathError{Op: "create", Path: d.join(tmp), Err: err}
		}
		return tmp, os.NewFile(uintptr(fd), d.join(tmp)), nil
	}
	return "", nil, fmt.Errorf("safefs: no free temp name for %s", d.join(name))
}

// WriteFile replaces the file at path atomically (see Dir.WriteFile). The directory must be one
// no pod can write to; missing parents are created with mode 0755. A relative path is taken from
// the working directory.
func WriteFile(path string, data []byte, perm os.FileMode, opts WriteOptions) error {
	path, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("safefs: %w", err)
	}
	d, err := MkdirAllOpen(filepath.Dir(path), 0o755)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.WriteFile(filepath.Base(path), data, perm, opts)
}
