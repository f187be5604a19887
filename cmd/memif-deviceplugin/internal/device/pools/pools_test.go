package pools

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/config"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/alloc"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func pool(units int) config.Pool {
	return config.Pool{Name: "hugepool", PageSize: config.Quantity{Bytes: 2 << 20}, UnitSize: config.Quantity{Bytes: 4 << 20}, UnitsPerNUMANode: units}
}

func newPool(t *testing.T, stateDir string, pc config.Pool) *Provider {
	t.Helper()
	p, err := New(stateDir, pc, []int{0}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Unmount() })
	return p
}

func mapUnit(t *testing.T, path string, size int) []byte {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

func TestPoolUnitsScrubAndRestart(t *testing.T) {
	testutil.NeedHugepages(t, 8)
	state := t.TempDir()
	p := newPool(t, state, pool(2))
	if got := len(p.Units()); got != 2 {
		t.Fatalf("units %d", got)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p.Dir(), &st); err != nil || st.Type != unix.HUGETLBFS_MAGIC || st.Bsize != 2<<20 {
		t.Fatalf("mount: %+v %v", st, err)
	}
	// The pool's pages are reserved for its mount, so a scrub's unlink-then-create cannot lose
	// them to another user of hugepages.
	if m, ok, err := testutil.TopMount(p.Dir()); err != nil || !ok || !strings.Contains(","+m.SuperOptions+",", ",min_size=8388608,") {
		t.Fatalf("pool mount without its reservation (min_size=8388608): %+v %v", m, err)
	}
	id := p.Units()[1].ID
	if id != "hugepool-n0-001" || p.Check(id) != nil {
		t.Fatalf("unit %s: %v", id, p.Check(id))
	}
	if m := p.Mount(id); m.Container != "/run/memifnet/pools/hugepool-n0-001" || m.Host != filepath.Join(state, "pools/hugepool/hugepool-n0-001") {
		t.Fatalf("mount %+v", m)
	}
	env, err := p.Grant([]string{"hugepool-n0-000", id})
	if err != nil || env["MEMIFNET_POOLS"] != "/run/memifnet/pools/hugepool-n0-000,/run/memifnet/pools/hugepool-n0-001" {
		t.Fatalf("env %v %v", env, err)
	}

	// Tenant A writes.
	a := mapUnit(t, p.Path(id), 4<<20)
	copy(a[4<<20-16:], "tenant A secret!")
	copy(a, "head")

	// The plugin restarts: the unit is in use and must keep its data.
	p2 := newPool(t, state, pool(2))
	if len(p2.Units()) != 2 {
		t.Fatalf("units after restart %d", len(p2.Units()))
	}
	if string(a[:4]) != "head" {
		t.Fatal("restart changed a unit in use")
	}

	// Tenant B, after the scrub, reads zeros everywhere.
	if err := p2.Scrub(id); err != nil {
		t.Fatal(err)
	}
	b := mapUnit(t, p2.Path(id), 4<<20)
	if !bytes.Equal(b, make([]byte, 4<<20)) {
		t.Fatal("tenant B sees tenant A's data")
	}

	// Damage and repair through scrub.
	if err := os.Truncate(p2.Path(id), 0); err == nil {
		if p2.Check(id) == nil {
			t.Fatal("truncated unit reported healthy")
		}
	}
	if err := os.Remove(p2.Path(id)); err != nil {
		t.Fatal(err)
	}
	if p2.Check(id) == nil {
		t.Fatal("missing unit reported healthy")
	}
	if err := p2.Scrub(id); err != nil {
		t.Fatal(err)
	}
	if err := p2.Check(id); err != nil {
		t.Fatalf("scrub did not repair: %v", err)
	}
}

// TestPoolTooFewPages: a size-limited hugetlbfs mount holds 2 of the 4
// configured units; the pool offers those 2 and does not fail.
func TestPoolTooFewPages(t *testing.T) {
	testutil.NeedHugepages(t, 4)
	state := t.TempDir()
	dir := filepath.Join(state, "pools", "hugepool")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("test", dir, "hugetlbfs", 0, "pagesize=2M,size=8M"); err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	p, err := New(state, pool(4), []int{0}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p.Units()); got != 2 {
		t.Fatalf("units %d, want 2", got)
	}
	if _, err := os.Stat(p.Path("hugepool-n0-002")); !os.IsNotExist(err) {
		t.Fatalf("half-made unit left behind: %v", err)
	}
}

func TestPoolWrongPageSizeMount(t *testing.T) {
	testutil.NeedHugepages(t, 1)
	state := t.TempDir()
	pc := pool(1)
	pc.PageSize = config.Quantity{Bytes: 1 << 30}
	pc.UnitSize = config.Quantity{Bytes: 1 << 30}
	dir := filepath.Join(state, "pools", "hugepool")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("test", dir, "hugetlbfs", 0, "pagesize=2M"); err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	p, err := New(state, pc, []int{0}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Units()) != 0 {
		t.Fatalf("units on a mount of the wrong page size: %v", p.Units())
	}
}

// TestScrubGivesTheNextTenantANewUnit plays a tenant that keeps its unit's fd and mapping across
// the scrub (or passed the fd to another pod) and uses them against whoever gets the unit next:
// it re-modes, re-owns, locks and truncates its old file, and writes through its old mapping.
// None of it reaches the next tenant, whose unit is a new file.
func TestScrubGivesTheNextTenantANewUnit(t *testing.T) {
	testutil.NeedHugepages(t, 8)
	p := newPool(t, t.TempDir(), pool(2))
	id := p.Units()[0].ID
	f, err := os.OpenFile(p.Path(id), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := unix.Mmap(int(f.Fd()), 0, 4<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(a)
	copy(a, "tenant A")
	var before unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &before); err != nil {
		t.Fatal(err)
	}
	if err := p.Scrub(id); err != nil {
		t.Fatal(err)
	}
	// Tenant A, after the scrub, through what it kept.
	if err := f.Chmod(0); err != nil {
		t.Fatal(err)
	}
	if err := f.Chown(65532, 65532); err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	copy(a, "written after the scrub")

	// Tenant B.
	var st unix.Stat_t
	if err := unix.Stat(p.Path(id), &st); err != nil {
		t.Fatal(err)
	}
	if st.Ino == before.Ino {
		t.Fatal("the scrub kept the unit's inode")
	}
	if st.Mode&0o7777 != fileMode || st.Uid != 0 || st.Gid != 0 || st.Size != 4<<20 {
		t.Fatalf("new unit: mode %o owner %d:%d size %d, want %o 0:0 %d", st.Mode&0o7777, st.Uid, st.Gid, st.Size, fileMode, 4<<20)
	}
	r, err := alloc.OpenFileRegion(p.Path(id), 0)
	if err != nil {
		t.Fatalf("tenant B cannot claim its unit while tenant A holds the old one: %v", err)
	}
	defer r.Close()
	if !bytes.Equal(r.Mem, make([]byte, 4<<20)) {
		t.Fatal("tenant B sees tenant A's data")
	}
	copy(r.Mem[1<<20:], "tenant B secret")
	// Tenant A truncates its old file: B's mapping must not fault (a SIGBUS would kill the test).
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	var sum int
	for _, c := range r.Mem {
		sum += int(c)
	}
	if string(r.Mem[1<<20:1<<20+15]) != "tenant B secret" || sum == 0 {
		t.Fatal("tenant B's unit changed")
	}
	if p.Check(id) != nil {
		t.Fatalf("unit unhealthy after the old tenant's tricks: %v", p.Check(id))
	}
}

// TestScrubUnderSignals scrubs 64Mi units while the process receives a stream of signals, as a
// busy Go process does (the runtime preempts goroutines with SIGURG): hugetlbfs's fallocate
// returns EINTR when a signal arrives between pages, which left the unit missing (unhealthy)
// until the next scrub.
func TestScrubUnderSignals(t *testing.T) {
	testutil.NeedHugepages(t, 2*32)
	pc := pool(2)
	pc.UnitSize = config.Quantity{Bytes: 64 << 20}
	p := newPool(t, t.TempDir(), pc)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = unix.Kill(os.Getpid(), unix.SIGURG) // the runtime's own preemption signal: ignored
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for i := range 40 {
		id := p.Units()[i%2].ID
		if err := p.Scrub(id); err != nil {
			t.Fatalf("scrub %d of %s: %v", i, id, err)
		}
		if err := p.Check(id); err != nil {
			t.Fatalf("after scrub %d: %v", i, err)
		}
	}
}
