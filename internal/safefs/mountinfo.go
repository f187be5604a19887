package safefs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MountEntry is one line of /proc/<pid>/mountinfo (proc(5)). The node agents never decide
// anything from it (they compare identities of what they opened, see Inspect); tests and the e2e
// harness read it to find and undo mounts.
type MountEntry struct {
	ID, Parent   int
	Dev          string   // major:minor of the file system
	Root         string   // the directory of the file system mounted here
	Point        string   // where it is mounted, relative to the reader's root
	Options      string   // per-mount options (rw,nosuid,...)
	Optional     []string // shared:N, master:N, propagate_from:N, unbindable
	FSType       string
	Source       string
	SuperOptions string // per-superblock options (size=...,mode=...)
}

// Propagation names the mount's propagation the way findmnt and mount(8) do: "private",
// "shared", "slave", "shared,slave" or "unbindable".
func (m MountEntry) Propagation() string {
	var tags []string
	for _, opt := range m.Optional {
		switch {
		case strings.HasPrefix(opt, "shared:"):
			tags = append(tags, "shared")
		case strings.HasPrefix(opt, "master:"):
			tags = append(tags, "slave")
		case opt == "unbindable":
			tags = append(tags, "unbindable")
		}
	}
	if len(tags) == 0 {
		return "private"
	}
	sort.Strings(tags)
	return strings.Join(tags, ",")
}

// ReadMountinfo reads /proc/self/mountinfo.
func ReadMountinfo() ([]MountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("safefs: %w", err)
	}
	defer f.Close()
	return ParseMountinfo(f)
}

// ParseMountinfo parses mountinfo lines. A line that does not have the format is an error.
func ParseMountinfo(r io.Reader) ([]MountEntry, error) {
	var out []MountEntry
	sc := bufio.NewScanner(r)
	// One line can be long (overlay mounts list every lower directory).
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		m, err := parseMountLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("safefs: mountinfo line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("safefs: read mountinfo: %w", err)
	}
	return out, nil
}

// parseMountLine parses
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// (ID, parent ID, major:minor, root, mount point, options, optional fields up to "-", then file
// system type, source and superblock options).
func parseMountLine(line string) (MountEntry, error) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) < sep+3 {
		return MountEntry{}, fmt.Errorf("%q: want 6 fields, optional ones, \"-\", and 2 or 3 more", line)
	}
	var m MountEntry
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil {
		return MountEntry{}, fmt.Errorf("mount ID %q: %w", f[0], err)
	}
	if m.Parent, err = strconv.Atoi(f[1]); err != nil {
		return MountEntry{}, fmt.Errorf("parent ID %q: %w", f[1], err)
	}
	m.Dev, m.Root, m.Point, m.Options = f[2], unescapeOctal(f[3]), unescapeOctal(f[4]), f[5]
	m.Optional = f[6:sep:sep]
	m.FSType, m.Source = unescapeOctal(f[sep+1]), unescapeOctal(f[sep+2])
	if len(f) > sep+3 {
		m.SuperOptions = f[sep+3]
	}
	return m, nil
}

// unescapeOctal undoes the kernel's \ooo escapes (\040 for a space, \134 for a backslash).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Mount is the mountinfo entry (of this process's mount namespace) of the mount d was reached
// through: the one its reusable mount id names, the id mountinfo shows.
func (d *Dir) Mount() (MountEntry, error) {
	var stx unix.Statx_t
	if err := unix.Statx(d.fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return MountEntry{}, fmt.Errorf("safefs: statx %s: %w", d.Path(), err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return MountEntry{}, fmt.Errorf("safefs: statx %s: the kernel reports no mount id", d.Path())
	}
	ms, err := ReadMountinfo()
	if err != nil {
		return MountEntry{}, err
	}
	for _, m := range ms {
		if uint64(m.ID) == stx.Mnt_id {
			return m, nil
		}
	}
	return MountEntry{}, fmt.Errorf("safefs: %s: mount %d is not in /proc/self/mountinfo", d.Path(), stx.Mnt_id)
}
