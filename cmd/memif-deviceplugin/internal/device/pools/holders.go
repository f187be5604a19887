package pools

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxHolders bounds how many holders a report names.
const maxHolders = 8

// findHolders names the processes that keep the file dev:ino alive through a descriptor or a
// mapping, as "pid 123 (comm) fd 4" or "pid 123 (comm) mapping", by a scan of <proc>/*/fd and
// <proc>/*/maps. It is for reports only: it sees the processes of the agent's PID namespace, and
// a descriptor in flight in a socket (sent with SCM_RIGHTS and never received) belongs to no
// process at all, so finding nobody proves nothing.
func findHolders(proc string, dev, ino uint64) []string {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		pid := e.Name()
		if _, err := strconv.Atoi(pid); err != nil || pid == self {
			continue
		}
		for _, how := range holdsFile(filepath.Join(proc, pid), dev, ino) {
			out = append(out, fmt.Sprintf("pid %s (%s) %s", pid, comm(filepath.Join(proc, pid)), how))
			if len(out) == maxHolders {
				return out
			}
		}
	}
	return out
}

// holdsFile lists how the process at dir holds dev:ino: "fd N" per descriptor, "mapping" once.
func holdsFile(dir string, dev, ino uint64) []string {
	var how []string
	fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
	for _, fd := range fds {
		var st unix.Stat_t
		// stat follows the magic link to the open file itself, deleted or not.
		if unix.Stat(filepath.Join(dir, "fd", fd.Name()), &st) == nil && st.Dev == dev && st.Ino == ino {
			how = append(how, "fd "+fd.Name())
		}
	}
	if mapsFile(filepath.Join(dir, "maps"), dev, ino) {
		how = append(how, "mapping")
	}
	return how
}

// mapsFile reports whether a maps file lists a mapping of dev:ino. A line is
// "start-end perms offset major:minor inode path", the device numbers in hex.
func mapsFile(path string, dev, ino uint64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
	wantIno := strconv.FormatUint(ino, 10)
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 5 && fields[4] == wantIno && fields[3] == want {
			return true
		}
	}
	return false
}

func comm(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
