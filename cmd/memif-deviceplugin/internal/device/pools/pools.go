// Package pools provides hugepage pools memifnet.io/<pool>: unit files on a hugetlbfs mount that
// the plugin makes under <stateDir>/pools/<pool>, each pre-faulted on one NUMA node. Handing a unit
// out again replaces its file: the old inode is unlinked (its pages go back to the kernel when the
// last mapping of it goes) and a new file is created, faulted in and given its mode and owner, so
// a previous tenant that kept a file descriptor or a mapping of its unit, or passed one to another
// pod, never sees, truncates, locks or re-modes the next tenant's memory.
package pools

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
)

const (
	// fileMode lets a non-root app map its unit; a unit is mounted into one
	// container at a time.
	fileMode = 0o666

	mpolDefault = 0
	mpolBind    = 2
)

// Provider is one pool.
type Provider struct {
	pool  config.Pool
	dir   string
	log   *slog.Logger
	units []device.Unit

	// mu makes each unlink-and-create one step: the pages an unlink gives back go to that
	// unit's new file, never to another unit being made at the same moment.
	mu       sync.Mutex
	wmu      sync.Mutex           // guards withheld (Check reads it while a scrub runs)
	withheld map[string]*withheld // units whose old file a previous tenant still holds
}

// New mounts hugetlbfs (unless it is mounted already, as after a plugin
// restart) and creates the missing unit files, unitsPerNUMANode per node.
// Existing unit files of the right size are kept as they are: they may be
// mapped by running pods. Missing hugepages are not fatal: the pool offers
// the units that could be made and the log says why there are fewer.
func New(stateDir string, pool config.Pool, nodes []int, log *slog.Logger) (*Provider, error) {
	p := &Provider{pool: pool, dir: filepath.Join(stateDir, names.PoolsSubdir, pool.Name), log: log.With("pool", pool.Name),
		withheld: map[string]*withheld{}}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	if err := p.mount(int64(len(nodes)*pool.UnitsPerNUMANode) * pool.UnitSize.Bytes); err != nil {
		p.log.Warn("pool has no units: cannot mount hugetlbfs", "err", err)
		return p, nil
	}
	for _, node := range nodes {
		p.addUnits(node)
	}
	return p, nil
}

// addUnits keeps the node's unit files that are there and makes the missing ones. A unit that
// cannot be made for want of pages is withheld when the mount holds pages of unlinked files (a
// previous tenant kept the old file across a restart of the agent: the unit comes back when it
// lets go); else the node is short of hugepages and the pool offers fewer units.
func (p *Provider) addUnits(node int) {
	made, short := 0, false
	for i := range p.pool.UnitsPerNUMANode {
		id := fmt.Sprintf("%s-n%d-%03d", p.pool.Name, node, i)
		if p.Check(id) == nil {
			p.units = append(p.units, device.Unit{ID: id, Node: node})
			made++
			continue
		}
		if short {
			continue
		}
		err := p.create(id, node)
		switch {
		case err == nil:
			made++
		case noPages(err) && p.orphanBytes() >= p.pool.UnitSize.Bytes:
			_ = p.withhold(id, nil)
		default:
			p.log.Warn("pool has fewer units than configured", "numaNode", node,
				"created", made, "configured", p.pool.UnitsPerNUMANode, "err", err)
			short = true
			continue
		}
		p.units = append(p.units, device.Unit{ID: id, Node: node})
	}
}

// mount makes the hugetlbfs mount with the pool's page size, reserving the pool's pages for it
// (min_size): a unit unlinked at a scrub gives its pages back to the mount's reservation, not to
// the machine, so no other user of hugepages can take them before the new unit file is made. The
// mount's size is the pool plus one unit of headroom: when a previous tenant keeps its old unit
// file (and so its pages), the new file is made in the headroom, from the node's free hugepages;
// a second held unit finds no room and is withheld, so that tenants cannot make the agent take
// more of the node's hugepages than that. When the machine cannot reserve the pool, the mount is
// made without the reservation, and says so.
func (p *Provider) mount(bytes int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p.dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", p.dir, err)
	}
	if st.Type == unix.HUGETLBFS_MAGIC {
		if st.Bsize != p.pool.PageSize.Bytes {
			return fmt.Errorf("%s is a hugetlbfs mount with page size %d, want %d", p.dir, st.Bsize, p.pool.PageSize.Bytes)
		}
		return nil
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	opts := fmt.Sprintf("pagesize=%d,size=%d,mode=0755", p.pool.PageSize.Bytes, bytes+p.pool.UnitSize.Bytes)
	reserved := fmt.Sprintf("%s,min_size=%d", opts, bytes)
	err := unix.Mount(names.PoolMountSourcePrefix+p.pool.Name, p.dir, "hugetlbfs", flags, reserved)
	if err == nil {
		return nil
	}
	p.log.Warn("pool's hugepages are not reserved: a scrub may lose a unit's pages to another user of hugepages", "err", err, "bytes", bytes)
	if err := unix.Mount(names.PoolMountSourcePrefix+p.pool.Name, p.dir, "hugetlbfs", flags, opts); err != nil {
		return fmt.Errorf("mount hugetlbfs on %s (%s): %w", p.dir, opts, err)
	}
	return nil
}

// Resource implements resource.Provider.
func (p *Provider) Resource() string { return names.ResourcePrefix + p.pool.Name }

// Units implements resource.Provider.
func (p *Provider) Units() []device.Unit { return p.units }

// Path is the host file of a unit.
func (p *Provider) Path(id string) string { return filepath.Join(p.dir, id) }

// Dir is the hugetlbfs mount of the pool.
func (p *Provider) Dir() string { return p.dir }

// Bytes is the memory held by the pool's units per NUMA node (withheld units hold none).
func (p *Provider) Bytes() map[int]int64 {
	withheld := p.Withheld()
	out := map[int]int64{}
	for _, u := range p.units {
		if withheld[u.ID] == nil {
			out[u.Node] += p.pool.UnitSize.Bytes
		}
	}
	return out
}

// Check reports a unit damaged when it is withheld, its file is gone, is not a regular file of
// the unit size, or the mount under it was replaced.
func (p *Provider) Check(id string) error {
	if w := p.withheldUnit(id); w != nil {
		return w.err
	}
	d, err := p.open()
	if err != nil {
		return fmt.Errorf("unit %s: %w", id, err)
	}
	defer d.Close()
	st, err := d.Lstat(id)
	if err != nil {
		return fmt.Errorf("unit %s: %w", id, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("unit %s: not a regular file", id)
	}
	if st.Size != p.pool.UnitSize.Bytes {
		return fmt.Errorf("unit %s: size %d, want %d", id, st.Size, p.pool.UnitSize.Bytes)
	}
	return nil
}

// open opens the pool's hugetlbfs mount.
func (p *Provider) open() (*safefs.Dir, error) {
	d, err := safefs.Open(p.dir)
	if err != nil {
		return nil, err
	}
	fs, err := d.Statfs()
	if err == nil && fs.Type != unix.HUGETLBFS_MAGIC {
		err = fmt.Errorf("%s is no longer hugetlbfs", p.dir)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// create makes a new unit file, faults all its pages in on node (so they are reserved now and
// not found missing when a pod maps them), gives it its mode and root as owner, and renames it
// into place. It never writes through an existing file: the new inode starts empty.
func (p *Provider) create(id string, node int) error {
	d, err := p.open()
	if err != nil {
		return fmt.Errorf("create unit %s: %w", id, err)
	}
	defer d.Close()
	tmp := "." + id + ".new"
	if err := d.Remove(tmp); err != nil { // left by a crash
		return fmt.Errorf("create unit %s: %w", id, err)
	}
	f, err := d.OpenFile(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, fileMode)
	if err != nil {
		return fmt.Errorf("create unit %s: %w", id, err)
	}
	defer f.Close()
	ok := false
	defer func() {
		if !ok { // leave no half-faulted file behind: it would hold pages
			_ = d.Remove(tmp)
		}
	}()
	if err := f.Chown(0, 0); err != nil {
		return fmt.Errorf("create unit %s: %w", id, err)
	}
	if err := onNode(node, func() error { return fallocate(f, p.pool.UnitSize.Bytes) }); err != nil {
		return fmt.Errorf("fault in unit %s on numa node %d: %w", id, node, err)
	}
	if err := d.Rename(tmp, id); err != nil {
		return fmt.Errorf("create unit %s: %w", id, err)
	}
	ok = true
	return nil
}

// fallocate faults in size bytes of f. hugetlbfs stops between pages when a signal is pending
// and returns EINTR (the Go runtime's preemption signals arrive at any time, more often under
// load); pages already faulted in stay, so calling again continues where it stopped.
func fallocate(f *os.File, size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, size)
		if err != unix.EINTR {
			return err
		}
	}
}

// onNode runs fn on a thread whose memory policy binds allocations to node.
// The thread stays locked and ends with the goroutine, so the policy never
// leaks into the Go scheduler's other work. A kernel without NUMA support
// (or a node the kernel does not know, as with a faked sysfs) runs fn unbound.
func onNode(node int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with us
		mask := make([]uint64, node/64+1)
		mask[node/64] |= 1 << (node % 64)
		_, _, errno := unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolBind,
			uintptr(unsafe.Pointer(&mask[0])), uintptr(len(mask)*64+1))
		runtime.KeepAlive(mask)
		err := fn()
		if errno == 0 {
			_, _, _ = unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolDefault, 0, 0)
		}
		done <- err
	}()
	return <-done
}

// Scrub replaces the unit with a new file. The old file is unlinked first, so that its pages
// return to the pool before the new file needs them. If something still holds the old file, its
// pages stay held and the new file finds none: the unit is withheld (the error wraps
// device.ErrWithheld and names the holders it can find), and a later Scrub makes it again once
// the pages are back (cheaply refused until then). Any other failure is a *device.ScrubError
// (device.ErrScrubFailed).
func (p *Provider) Scrub(id string) error {
	node, ok := p.nodeOf(id)
	if !ok {
		return &device.ScrubError{ID: id, Err: errors.New("unknown unit")}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.withheldUnit(id); w != nil {
		return p.refillLocked(id, node, w)
	}
	d, err := p.open()
	if err != nil {
		return &device.ScrubError{ID: id, Err: err}
	}
	var old *unix.Stat_t
	if st, err := d.Lstat(id); err == nil {
		old = &st
	}
	err = d.Remove(id)
	d.Close()
	if err != nil {
		return &device.ScrubError{ID: id, Err: err}
	}
	if err := p.create(id, node); err != nil {
		if noPages(err) {
			return p.withhold(id, old)
		}
		return &device.ScrubError{ID: id, Err: err}
	}
	return nil
}

func (p *Provider) nodeOf(id string) (int, bool) {
	for _, u := range p.units {
		if u.ID == id {
			return u.Node, true
		}
	}
	return 0, false
}

// Mount puts a unit file at /run/memifnet/pools/<unit>.
func (p *Provider) Mount(id string) device.Mount {
	return device.Mount{Host: p.Path(id), Container: names.ContainerPoolsDir + "/" + id}
}

// Grant lists the container paths of the units in MEMIFNET_POOLS.
func (p *Provider) Grant(ids []string) (map[string]string, error) {
	paths := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, ok := p.nodeOf(id); !ok {
			return nil, fmt.Errorf("grant: unknown unit %s", id)
		}
		paths = append(paths, p.Mount(id).Container)
	}
	return map[string]string{names.EnvPools: strings.Join(paths, ",")}, nil
}

// Unmount removes the pool's mount; only for tests and explicit teardown,
// never at plugin shutdown (running pods keep their units across restarts).
func (p *Provider) Unmount() error {
	if err := unix.Unmount(p.dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unmount %s: %w", p.dir, err)
	}
	return nil
}
