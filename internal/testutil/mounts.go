package testutil

import (
	"bufio"
	"errors"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// UnmountUnder detaches every mount at or below dir, deepest first, so that a test that mounted
// slots, links or pools in a temp directory leaves no mount behind and its files can be removed.
func UnmountUnder(t testing.TB, dir string) {
	t.Helper()
	for _, m := range MountsUnder(t, dir) {
		err := unix.Unmount(m, unix.MNT_DETACH)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("unmount %s: %v", m, err)
		}
	}
}

// MountsUnder lists the mount points at or below dir, deepest first.
func MountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 16<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountinfo(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	// Deepest first (MNT_DETACH of a parent would take the children along, but then their own
	// unmount would fail).
	sort.SliceStable(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

// MountSource is the source field of the topmost mount on dir ("" when nothing is mounted there).
func MountSource(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	src := ""
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != dir {
			continue
		}
		_, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(post); ok && len(f) >= 2 {
			src = unescapeMountinfo(f[1])
		}
	}
	return src
}

// unescapeMountinfo undoes the octal escapes of mountinfo (\040 for a space and so on).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
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
