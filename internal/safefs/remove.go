package safefs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// maxRemoveDepth bounds RemoveAll's recursion: the trees it removes are the agents' own layout,
// a few levels deep.
const maxRemoveDepth = 16

// Names lists the entries of the directory (not "." and "..").
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("safefs: open %s: %w", d.path, err)
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("safefs: read %s: %w", d.path, err)
	}
	return names, nil
}

// RemoveAll removes name (one component) and everything beneath it, like os.RemoveAll, but it
// follows no symlink (a symlink is removed, not what it points to) and crosses no mount point:
// a mount found on the way is refused and left with the directories above it, so that a tree a
// pod could reach never makes the caller delete files of another file system. A missing name is
// not an error. Every entry that can be removed is; the error lists what could not.
func (d *Dir) RemoveAll(name string) error {
	return d.removeAll(name, 0)
}

func (d *Dir) removeAll(name string, depth int) error {
	if err := checkName(name, false); err != nil {
		return err
	}
	st, err := d.Lstat(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return d.Remove(name)
	}
	if depth >= maxRemoveDepth {
		return refused(d.join(name), "it is more than %d directories deep", maxRemoveDepth)
	}
	sub, err := d.OpenDir(name) // refuses a mount point: RESOLVE_NO_XDEV
	if err != nil {
		return err
	}
	defer sub.Close()
	names, err := sub.Names()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, sub.removeAll(n, depth+1))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return d.Remove(name)
}
