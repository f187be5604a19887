package testutil

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/safefs"
)

// Mounts lists the mount points at or below dir, deepest first (a mount stacked on another at
// the same point comes after it, as in mountinfo).
func Mounts(dir string) ([]string, error) {
	ms, err := safefs.ReadMountinfo()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.Point == dir || strings.HasPrefix(m.Point, strings.TrimSuffix(dir, "/")+"/") {
			out = append(out, m.Point)
		}
	}
	// Deepest first: MNT_DETACH of a parent would take the children along, but then their own
	// unmount would fail.
	sort.SliceStable(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out, nil
}

// UnmountAll lazily detaches every mount at or below dir, deepest first, repeating while stacked
// mounts remain, so that whatever a test or a stack mounted in its directory is gone and the
// directory can be removed.
func UnmountAll(dir string) error {
	for range 50 {
		mps, err := Mounts(dir)
		if err != nil || len(mps) == 0 {
			return err
		}
		for _, mp := range mps {
			err := unix.Unmount(mp, unix.MNT_DETACH)
			if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", mp, err)
			}
		}
	}
	return fmt.Errorf("mounts below %s keep coming back", dir)
}

// TopMount is the topmost mount on dir; ok is false when nothing is mounted there.
func TopMount(dir string) (m safefs.MountEntry, ok bool, err error) {
	ms, err := safefs.ReadMountinfo()
	if err != nil {
		return m, false, err
	}
	for _, e := range ms {
		if e.Point == dir {
			m, ok = e, true // a later line is mounted over an earlier one
		}
	}
	return m, ok, nil
}

// UnmountUnder is UnmountAll for a test's cleanup: a failure fails t.
func UnmountUnder(t testing.TB, dir string) {
	t.Helper()
	if err := UnmountAll(dir); err != nil {
		t.Error(err)
	}
}

// MountsUnder is Mounts, failing t on an error.
func MountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	mps, err := Mounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	return mps
}

// MountSource is the source field of the topmost mount on dir ("" when nothing is mounted there).
func MountSource(t testing.TB, dir string) string {
	t.Helper()
	m, _, err := TopMount(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m.Source
}
