package pools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/internal/testutil"
)

// usedBytes is the hugepage memory the pool's mount holds, deleted files included.
func usedBytes(t *testing.T, p *Provider) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(p.Dir(), &st); err != nil {
		t.Fatal(err)
	}
	if !bounded(st) || st.Blocks*uint64(st.Bsize) != uint64(p.pool.UnitsPerNUMANode+1)*uint64(p.pool.UnitSize.Bytes) {
		t.Fatalf("the pool's mount is not sized to the pool and one unit: %+v", st)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// TestHeldUnitIsWithheld plays tenants that keep their units (a descriptor, or a mapping with
// the descriptor closed) in processes that outlive their pods. The first held unit is made again
// in the pool's headroom; the second finds no room, since the old pages are still held: it is
// withheld, naming its holder, and the pool holds no more hugepages than the pool and its
// headroom; the other unit keeps being scrubbed and handed out; once the holder exits, the unit
// is made again.
func TestHeldUnitIsWithheld(t *testing.T) {
	for _, how := range []string{testutil.HoldFD, testutil.HoldMapping} {
		t.Run(how, func(t *testing.T) { heldUnit(t, how) })
	}
}

func heldUnit(t *testing.T, how string) {
	testutil.NeedHugepages(t, 16)
	p := newPool(t, t.TempDir(), pool(3))
	first, held, other := p.Units()[0].ID, p.Units()[1].ID, p.Units()[2].ID
	const limit = 16 << 20 // 3 units of 4Mi and one of headroom
	testutil.HoldFile(t, p.Path(first), how)
	if err := p.Scrub(first); err != nil {
		t.Fatalf("scrub of the first held unit (the headroom has room): %v", err)
	}
	h := testutil.HoldFile(t, p.Path(held), how)
	err := p.Scrub(held)
	if !errors.Is(err, device.ErrWithheld) {
		t.Fatalf("scrub of a second held unit: %v, want it withheld", err)
	}
	if holder := fmt.Sprintf("pid %d", h.Pid); !strings.Contains(err.Error(), held) || !strings.Contains(err.Error(), holder) {
		t.Errorf("withheld error %q does not name the unit and %s", err, holder)
	}
	if err := p.Check(held); !errors.Is(err, device.ErrWithheld) {
		t.Errorf("check of the withheld unit: %v", err)
	}
	if w := p.Withheld(); len(w) != 1 || w[held] == nil {
		t.Errorf("withheld units %v, want only %s", w, held)
	}
	if got := usedBytes(t, p); got > limit {
		t.Errorf("the pool holds %d bytes, more than %d: tenants made the agent take node hugepages", got, limit)
	}
	// The other units keep their own pages: scrubbed and handed out, again and again.
	for i := range 3 {
		for _, id := range []string{other, first} {
			if err := p.Scrub(id); err != nil {
				t.Fatalf("scrub %d of %s: %v", i, id, err)
			}
			if err := p.Check(id); err != nil {
				t.Fatalf("%s after scrub %d: %v", id, i, err)
			}
			touchUnit(t, p.Path(id)) // a tenant that lets go
		}
	}
	// Retries while the holder holds on are refused (cheaply), and change nothing.
	if err := p.Scrub(held); !errors.Is(err, device.ErrWithheld) {
		t.Fatalf("retry while held: %v", err)
	}
	h.Release()
	testutil.Eventually(t, 5*time.Second, "unit refilled after the holder exits", func() bool { return p.Scrub(held) == nil })
	if err := p.Check(held); err != nil {
		t.Fatalf("refilled unit: %v", err)
	}
	if w := p.Withheld(); len(w) != 0 {
		t.Errorf("still withheld: %v", w)
	}
	f, err := os.OpenFile(p.Path(held), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 4<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if m[0] != 0 {
		t.Error("the refilled unit carries the holder's data")
	}
}

// TestHeldUnitAcrossRestart: the agent restarts while a unit is withheld (its file is gone, the
// old pages held). The restarted pool keeps the unit, withheld, and every unit after it; the
// unit comes back when the holder lets go.
func TestHeldUnitAcrossRestart(t *testing.T) {
	testutil.NeedHugepages(t, 16)
	state := t.TempDir()
	p := newPool(t, state, pool(3))
	held := p.Units()[1].ID
	testutil.HoldFile(t, p.Path(p.Units()[0].ID), testutil.HoldMapping) // takes the headroom
	if err := p.Scrub(p.Units()[0].ID); err != nil {
		t.Fatal(err)
	}
	h := testutil.HoldFile(t, p.Path(held), testutil.HoldMapping)
	if err := p.Scrub(held); !errors.Is(err, device.ErrWithheld) {
		t.Fatalf("scrub: %v", err)
	}
	p2 := newPool(t, state, pool(3))
	if n := len(p2.Units()); n != 3 {
		t.Fatalf("after restart the pool has %d units, want 3", n)
	}
	if err := p2.Check(held); !errors.Is(err, device.ErrWithheld) {
		t.Fatalf("after restart %s: %v, want withheld", held, err)
	}
	if err := p2.Check(p2.Units()[2].ID); err != nil {
		t.Fatalf("the unit after the withheld one: %v", err)
	}
	h.Release()
	testutil.Eventually(t, 5*time.Second, "unit refilled after the holder exits", func() bool { return p2.Scrub(held) == nil })
}

// touchUnit maps a unit, writes to it and lets go, as a tenant that leaves properly.
func touchUnit(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 4<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	m[0] = 1
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
}

// TestHeldUnitOnMountSizedToThePool: where the agent's hugepages are bounded by the pool itself
// (a hugetlb cgroup limit equal to the pool, played here by a mount of that size made before the
// agent starts), there is no headroom: the first held unit is withheld, and the rest keep working.
func TestHeldUnitOnMountSizedToThePool(t *testing.T) {
	testutil.NeedHugepages(t, 8)
	state := t.TempDir()
	dir := filepath.Join(state, "pools", "hugepool")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("test", dir, "hugetlbfs", 0, "pagesize=2M,size=8M,min_size=8M"); err != nil {
		t.Fatalf("mount: %v", err)
	}
	p := newPool(t, state, pool(2))
	held, other := p.Units()[0].ID, p.Units()[1].ID
	h := testutil.HoldFile(t, p.Path(held), testutil.HoldFD)
	if err := p.Scrub(held); !errors.Is(err, device.ErrWithheld) {
		t.Fatalf("scrub of the held unit: %v, want it withheld", err)
	}
	for range 3 {
		if err := p.Scrub(other); err != nil {
			t.Fatalf("scrub of %s: %v", other, err)
		}
	}
	h.Release()
	testutil.Eventually(t, 5*time.Second, "unit refilled after the holder exits", func() bool { return p.Scrub(held) == nil })
}
