package cluster

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
)

// nodeSnapshotDirs are the directories a node's snapshot reads (NodeSnapshot): memifnet's state
// dir and the node-local directories memifnet writes into.
func (c *Cluster) nodeSnapshotDirs() []string {
	return []string{names.StateDir, c.Paths.CNIBinDir, c.Paths.CNIConfDir, names.KubeletDir, "/run/cdi", "/etc/cdi", "/run/k8s.cni.cncf.io"}
}

// NodeSnapshot is node i's state as TakeSnapshot's Mounts and Paths have it, read in the node's
// own view (NodeView): the mounts it sees below the directories memifnet writes into, and the
// paths of its state dir's tree, its CNI dirs and memifnet's files in dirs it shares. Node 1's
// is TakeSnapshot, the machine's.
func (c *Cluster) NodeSnapshot(i int) (Snapshot, error) {
	if i == 1 {
		return TakeSnapshot(c.Paths)
	}
	var s Snapshot
	root, mountinfo, err := c.NodeView(i)
	if err != nil {
		return s, err
	}
	f, err := os.Open(mountinfo)
	if err != nil {
		return s, err
	}
	ms, err := safefs.ParseMountinfo(f)
	f.Close()
	if err != nil {
		return s, err
	}
	for _, d := range c.nodeSnapshotDirs() {
		for _, m := range VisibleUnder(ms, d) {
			s.Mounts = append(s.Mounts, m.Point+" "+m.Propagation())
		}
	}
	sort.Strings(s.Mounts)
	in := func(p string) string { return "/" + strings.TrimPrefix(strings.TrimPrefix(p, root), "/") }
	state := filepath.Join(root, names.StateDir)
	_ = filepath.WalkDir(state, func(p string, _ os.DirEntry, err error) error {
		if err == nil && p != state {
			s.Paths = append(s.Paths, in(p)) // WalkDir follows no symlink
		}
		return nil
	})
	if _, err := os.Lstat(state); err == nil {
		s.Paths = append(s.Paths, names.StateDir)
	}
	// /var/run is a link to /run, which a path through /proc/<pid>/root would take on the
	// machine's root.
	globs := []string{c.Paths.CNIBinDir + "/*", c.Paths.CNIConfDir + "/*"}
	for _, g := range MemifnetFiles {
		globs = append(globs, strings.Replace(g, "/var/run/", "/run/", 1))
	}
	for _, g := range globs {
		m, _ := filepath.Glob(filepath.Join(root, g))
		for _, p := range m {
			s.Paths = append(s.Paths, in(p))
		}
	}
	sort.Strings(s.Paths)
	return s, nil
}

// VisibleUnder is the mounts below dir that a path reaches. On a node after the first, dir lies
// on one of the node's own binds (NodePaths); node 1's mounts below the same path propagate into
// the node's mount namespace too (it is a slave of the machine's) but hang beneath that bind,
// hidden, and are not the node's: only mounts descending from the mount that covers dir (the
// deepest at dir or above it, the last mounted there) count.
func VisibleUnder(ms []MountEntry, dir string) []MountEntry {
	byID := map[int]MountEntry{}
	top, depth := -1, -1
	for _, m := range ms {
		byID[m.ID] = m
		covers := m.Point == dir || m.Point == "/" || strings.HasPrefix(dir, m.Point+"/")
		if covers && len(m.Point) >= depth {
			top, depth = m.ID, len(m.Point)
		}
	}
	var out []MountEntry
	for _, m := range ms {
		if !strings.HasPrefix(m.Point, dir+"/") {
			continue
		}
		ok := top < 0
		for p, seen := m.Parent, 0; !ok && seen < len(ms); p, seen = byID[p].Parent, seen+1 {
			if p == top {
				ok = true
			}
			if _, known := byID[p]; !known {
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// MountEntry is one line of a mountinfo.
type MountEntry = safefs.MountEntry
