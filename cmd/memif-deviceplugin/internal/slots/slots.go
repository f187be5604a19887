// Package slots provides memifnet.io/socket: N host directories, one per
// memif port, that are bind-mounted into containers.
package slots

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/resource"
	"github.com/memifnet/memifnet/internal/names"
)

const (
	// dirMode lets a non-root app create its socket in the slot. A slot is
	// mounted into one pod at a time, so world-writable leaks nothing.
	dirMode = 0o777
)

// Provider manages the slot directories under <stateDir>/sockets.
type Provider struct {
	dir     string
	units   []resource.Unit
	devinfo devinfo.Writer
}

// IDs returns the slot names for n slots: slot-000, slot-001, ... The width
// is at least three digits so names sort in numeric order in ls.
func IDs(n int) []string {
	width := len(fmt.Sprint(n - 1))
	width = max(width, 3)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("slot-%0*d", width, i)
	}
	return ids
}

// New creates missing slot directories (existing ones are kept untouched:
// after a plugin restart they may be in use). Slots are spread over the NUMA
// nodes in contiguous blocks so that a container can get all of its slots
// on the node of its pool units and CPUs.
func New(stateDir string, n int, nodes []int, dw devinfo.Writer) (*Provider, error) {
	p := &Provider{dir: filepath.Join(stateDir, names.SocketsSubdir), devinfo: dw}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("slots dir: %w", err)
	}
	if len(nodes) == 0 {
		nodes = []int{0}
	}
	for i, id := range IDs(n) {
		node := nodes[i*len(nodes)/n]
		p.units = append(p.units, resource.Unit{ID: id, Node: node})
		path := filepath.Join(p.dir, id)
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			if err := mkdir(path); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

func mkdir(path string) error {
	if err := os.Mkdir(path, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create slot: %w", err)
	}
	// Mkdir is subject to the umask.
	if err := os.Chmod(path, dirMode); err != nil {
		return fmt.Errorf("create slot: %w", err)
	}
	return nil
}

// Resource implements resource.Provider.
func (p *Provider) Resource() string { return names.SocketResource }

// Units implements resource.Provider.
func (p *Provider) Units() []resource.Unit { return p.units }

// Dir is the host directory of a slot.
func (p *Provider) Dir(id string) string { return filepath.Join(p.dir, id) }

// Check reports a slot damaged when its directory is missing, is not a
// directory (a symlink could point the container anywhere) or lost its mode.
func (p *Provider) Check(id string) error {
	fi, err := os.Lstat(p.Dir(id))
	if err != nil {
		return fmt.Errorf("slot %s: %w", id, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("slot %s: not a directory (%s)", id, fi.Mode().Type())
	}
	if fi.Mode().Perm() != dirMode {
		return fmt.Errorf("slot %s: mode %o, want %o", id, fi.Mode().Perm(), dirMode)
	}
	return nil
}

// Scrub empties the slot directory and restores it. A link directory the CNI
// bind-mounted into the slot is unmounted first: deleting through the mount
// would destroy another pod's link.
func (p *Provider) Scrub(id string) error {
	path := p.Dir(id)
	if err := p.devinfo.Remove(names.SocketResource, id); err != nil {
		return fmt.Errorf("scrub %s: %w", id, err)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return mkdir(path)
	case err != nil:
		return fmt.Errorf("scrub %s: %w", id, err)
	case !fi.IsDir():
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("scrub %s: %w", id, err)
		}
		return mkdir(path)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("scrub %s: %w", id, err)
	}
	for _, e := range ents {
		sub := filepath.Join(path, e.Name())
		if e.IsDir() {
			if err := unmountAll(sub); err != nil {
				return fmt.Errorf("scrub %s: %w", id, err)
			}
		}
		if err := os.RemoveAll(sub); err != nil {
			return fmt.Errorf("scrub %s: %w", id, err)
		}
	}
	return mkdir(path)
}

// unmountAll removes every mount stacked on path.
func unmountAll(path string) error {
	for range 16 {
		mounted, err := isMountPoint(path)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 16 unmounts", path)
}

// isMountPoint looks path up in mountinfo: a bind mount from the same file
// system has the same st_dev, so comparing devices is not enough.
func isMountPoint(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && unescapeMount(fields[4]) == path {
			return true, nil
		}
	}
	if err := s.Err(); err != nil {
		return false, fmt.Errorf("read mountinfo: %w", err)
	}
	return false, nil
}

// unescapeMount undoes the octal escapes of mountinfo (\040 for space etc).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
					break
				}
				c = c*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Mount puts a slot at /run/memifnet/<slot>. The directory is mounted, not
// a socket file, so sockets made later by the CNI, the host data plane or
// the app appear in the container.
func (p *Provider) Mount(id string) resource.Mount {
	return resource.Mount{Host: p.Dir(id), Container: names.ContainerDir + "/" + id}
}

// Grant lists the slots in MEMIFNET_SOCKETS and writes their device-info
// files.
func (p *Provider) Grant(ids []string) (map[string]string, error) {
	for _, id := range ids {
		if err := p.devinfo.WriteMemif(names.SocketResource, id, p.Mount(id).Container+"/"+names.SocketFile); err != nil {
			return nil, fmt.Errorf("grant %s: %w", id, err)
		}
	}
	return map[string]string{names.EnvSockets: strings.Join(ids, ",")}, nil
}
