package cluster

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
)

// unmountAgentMounts detaches the mounts memifnet made under stateDir, newest first, so that a
// cluster that went down without an uninstall (or whose agent could not clean) gives back its
// slots' tmpfs and its pools' hugepages even when stateDir existed before the cluster (and so
// stays). Detaching a slot takes what is mounted inside it along; nothing else is unmounted.
func unmountAgentMounts(stateDir string) error {
	ms, err := safefs.ReadMountinfo()
	if err != nil {
		return err
	}
	var errs []error
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		if !strings.HasPrefix(m.Point, stateDir+"/") || !names.IsMemifnetMount(m.FSType, m.Source) {
			continue
		}
		err := unix.Unmount(m.Point, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m.Point, err)) // EINVAL, ENOENT: gone with its parent
		}
	}
	return errors.Join(errs...)
}
