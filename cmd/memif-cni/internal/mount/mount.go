// Package mount bind-mounts a link directory onto a slot's link/ directory and undoes it.
package mount

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Bind mounts src on dst, creating dst. Binding twice is a no-op, so a retried ADD does not stack
// mounts.
func Bind(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("bind %s: %w", dst, err)
	}
	if Same(src, dst) {
		return nil
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	return nil
}

// Same reports whether dst shows the directory src (dst is a bind mount of it).
func Same(src, dst string) bool {
	var a, b unix.Stat_t
	if unix.Stat(src, &a) != nil || unix.Stat(dst, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// Unbind removes every mount stacked on dst and then dst itself. It never deletes through a
// mount: that would destroy the link's socket under the other pod. A missing dst is fine.
func Unbind(dst string) error {
	for range 16 {
		err := unix.Unmount(dst, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break // not a mount point (any more), or gone
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", dst, err)
		}
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dst, err)
	}
	return nil
}
