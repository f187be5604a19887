// Package slots provides memifnet.io/socket: one host directory per memif port, bind-mounted
// read-write into the container that gets it. Each slot is its own tmpfs, with a size and an
// inode limit, mounted by the plugin at <stateDir>/sockets/<slot>: a pod can fill only its own
// slot, never the node's disk. Handing a slot out again replaces its tmpfs (the old one is
// detached and freed when its last user lets go), so a previous tenant that kept a file
// descriptor to its slot, or passed one to another pod, sees only the dead file system and never
// the next tenant's files.
package slots

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/tmpfs"
)

const (
	// rootMode lets a non-root app create its socket in the slot. A slot is mounted into one pod
	// at a time and replaced before the next, so world-writable leaks nothing.
	rootMode = 0o777
)

// Provider manages the slot mounts under <stateDir>/sockets.
type Provider struct {
	dir     *safefs.Dir // <stateDir>/sockets: written by the plugin only
	limits  tmpfs.Limits
	units   []device.Unit
	devinfo devinfo.Writer
	log     *slog.Logger

	mu    sync.Mutex
	mount map[string]safefs.Identity // the current tmpfs of each slot
}

// IDs returns the slot names for n slots: slot-000, slot-001, ... The width is at least three
// digits so names sort in numeric order in ls.
func IDs(n int) []string { return PrefixedIDs(names.SlotPrefix, n) }

// PrefixedIDs returns the slot names <prefix>-000, ... (the DRA driver's are dra-slot-NNN).
func PrefixedIDs(prefix string, n int) []string {
	width := len(fmt.Sprint(n - 1))
	width = max(width, 3)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%0*d", prefix, width, i)
	}
	return ids
}

// New mounts a tmpfs on every slot that has none. A slot that is already a tmpfs mount (after a
// plugin restart) is kept as it is: a running pod may be using it. Slots are spread over the
// NUMA nodes in contiguous blocks so that a container can get all of its slots on the node of its
// pool units and CPUs.
func New(stateDir string, n int, nodes []int, limits tmpfs.Limits, dw devinfo.Writer, log *slog.Logger) (*Provider, error) {
	return NewPrefixed(stateDir, names.SlotPrefix, n, nodes, limits, dw, log)
}

// NewPrefixed is New for slots named <prefix>-NNN: the DRA driver's own slots live next to the
// device plugin's in the same directory and never share a name with them.
func NewPrefixed(stateDir, prefix string, n int, nodes []int, limits tmpfs.Limits, dw devinfo.Writer, log *slog.Logger) (*Provider, error) {
	dir, err := safefs.MkdirAllOpen(stateDir+"/"+names.SocketsSubdir, 0o755)
	if err != nil {
		return nil, fmt.Errorf("slots dir: %w", err)
	}
	p := &Provider{dir: dir, limits: limits, devinfo: dw, log: log, mount: map[string]safefs.Identity{}}
	if len(nodes) == 0 {
		nodes = []int{0}
	}
	for i, id := range PrefixedIDs(prefix, n) {
		p.units = append(p.units, device.Unit{ID: id, Node: nodes[i*len(nodes)/n]})
		mid, mounted, err := p.current(id)
		switch {
		case err == nil && mounted:
			p.mount[id] = mid
		case err == nil || errors.Is(err, os.ErrNotExist):
			if err := p.replace(id); err != nil {
				p.Close()
				return nil, err
			}
		default:
			p.Close()
			return nil, fmt.Errorf("slot %s: %w", id, err)
		}
	}
	return p, nil
}

// Close releases the directory handle; the mounts stay (running pods use them).
func (p *Provider) Close() error { return p.dir.Close() }

// current reports the tmpfs mounted at slot id, if there is one.
func (p *Provider) current(id string) (safefs.Identity, bool, error) {
	mid, mounted, err := p.dir.MountAt(id)
	if err != nil || !mounted {
		return mid, false, err
	}
	d, err := p.dir.OpenMountDir(id)
	if err != nil {
		return mid, false, err
	}
	defer d.Close()
	st, err := d.Statfs()
	if err != nil {
		return mid, false, err
	}
	if st.Type != unix.TMPFS_MAGIC {
		return mid, false, fmt.Errorf("%s/%s is a mount of file system type %#x, not the plugin's tmpfs", p.dir.Path(), id, st.Type)
	}
	return mid, true, nil
}

// replace detaches whatever is mounted at slot id and mounts a fresh, empty tmpfs there.
func (p *Provider) replace(id string) error {
	if _, err := p.dir.Unmount(id, safefs.Identity{}); err != nil {
		return fmt.Errorf("slot %s: %w", id, err)
	}
	if _, err := p.dir.Mkdir(id, 0o755); err != nil {
		return fmt.Errorf("slot %s: %w", id, err)
	}
	mid, err := p.dir.MountTmpfs(id, safefs.TmpfsOptions{Source: names.SlotMountSource, Limits: p.limits, Mode: rootMode})
	if err != nil {
		return fmt.Errorf("slot %s: %w", id, err)
	}
	p.mu.Lock()
	p.mount[id] = mid
	p.mu.Unlock()
	return nil
}

// Resource implements resource.Provider.
func (p *Provider) Resource() string { return names.SocketResource }

// Units implements resource.Provider.
func (p *Provider) Units() []device.Unit { return p.units }

// Dir is the host directory of a slot.
func (p *Provider) Dir(id string) string { return p.dir.Path() + "/" + id }

// Check reports a slot damaged when the tmpfs the plugin mounted there is gone or replaced, or
// its root lost its mode.
func (p *Provider) Check(id string) error {
	p.mu.Lock()
	want, ok := p.mount[id]
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("slot %s: not mounted", id)
	}
	in, err := p.dir.Inspect(id)
	switch {
	case err != nil:
		return fmt.Errorf("slot %s: %w", id, err)
	case !in.MountRoot:
		return fmt.Errorf("slot %s: its tmpfs is no longer mounted", id)
	case in.Identity != want:
		return fmt.Errorf("slot %s: the mount there (%s) is not the plugin's tmpfs (%s)", id, in.Identity, want)
	case in.Mode&0o7777 != rootMode:
		return fmt.Errorf("slot %s: mode %o, want %o", id, in.Mode&0o7777, rootMode)
	}
	return nil
}

// Scrub gives the slot a fresh tmpfs and removes its device-info file. The old tmpfs, with
// anything the previous tenant left in it and any link directory the CNI bind-mounted into it,
// is detached, never deleted through: a link's own files belong to its other pod too. A failure
// is a *device.ScrubError (device.ErrScrubFailed).
func (p *Provider) Scrub(id string) error {
	if err := p.devinfo.Remove(names.SocketResource, id); err != nil {
		return &device.ScrubError{ID: id, Err: err}
	}
	if err := p.replace(id); err != nil {
		return &device.ScrubError{ID: id, Err: err}
	}
	return nil
}

// Mount puts a slot at /run/memifnet/<slot>. The directory is mounted, not a socket file, so
// sockets made later by the CNI, the host data plane or the app appear in the container; the
// runtime binds it recursively, so a link the CNI mounted on <slot>/link comes along.
func (p *Provider) Mount(id string) device.Mount {
	return device.Mount{Host: p.Dir(id), Container: names.ContainerDir + "/" + id}
}

// Grant lists the slots in MEMIFNET_SOCKETS and writes their device-info files.
func (p *Provider) Grant(ids []string) (map[string]string, error) {
	for _, id := range ids {
		if err := p.devinfo.WriteMemif(names.SocketResource, id, p.Mount(id).Container+"/"+names.SocketFile); err != nil {
			return nil, fmt.Errorf("grant %s: %w", id, err)
		}
	}
	return map[string]string{names.EnvSockets: strings.Join(ids, ",")}, nil
}
