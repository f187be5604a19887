package dpdkpeer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/memifnet/memifnet/internal/testutil"
)

// Prerequisites says why DPDK interop cannot run here, or nil.
func Prerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (testpmd's EAL)")
	}
	if _, err := exec.LookPath("dpdk-testpmd"); err != nil {
		return errors.New("dpdk-testpmd not found (apt-get install -y dpdk-dev librte-net-memif23)")
	}
	// Debian's EAL loads every PMD in its pmds directory, so finding the file is enough.
	pmds, _ := filepath.Glob("/usr/lib/*/dpdk/pmds-*/librte_net_memif.so*")
	if len(pmds) == 0 {
		return errors.New("DPDK net_memif PMD not found (apt-get install -y librte-net-memif23)")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return errors.New("taskset not found (apt-get install -y util-linux)")
	}
	return nil
}

// HugePagesFree reports whether the kernel has free hugepages enough for one peer; without them
// testpmd runs NoHuge.
func HugePagesFree() bool {
	m, err := testutil.Hugepages()
	return err == nil && m.Free >= 128 // ~256 MiB of 2 MiB pages: what one peer with the default mbufs needs
}

// ListenerUp reports whether a SOCK_SEQPACKET socket is listening on name (as /proc/net/unix
// shows it: "@path" for an abstract one).
func ListenerUp(name string) (bool, error) {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return false, fmt.Errorf("dpdkpeer: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(sc.Text())
		const acceptCon, seqPacket = "00010000", "0005" // __SO_ACCEPTCON, SOCK_SEQPACKET
		if len(f) >= 8 && f[3] == acceptCon && f[4] == seqPacket && f[7] == name {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("dpdkpeer: read /proc/net/unix: %w", err)
	}
	return false, nil
}

// ErrNoListener is why a client did not start: nothing listened on its socket in time.
var ErrNoListener = errors.New("dpdkpeer: no memif listener")

// waitListener waits until something listens on name: the only way to learn that a memif server
// is there without connecting to it (a DPDK client gets one connect, at port start).
func waitListener(ctx context.Context, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		up, err := ListenerUp(name)
		if err != nil || up {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w on %s after %v", ErrNoListener, name, timeout)
		case <-tick.C:
		}
	}
}

// removeStaleSocket removes a filesystem socket nobody listens on any more (DPDK's server
// would fail to bind it).
func removeStaleSocket(o Options) error {
	if !o.FSSocket {
		return nil
	}
	st, err := os.Lstat(o.Socket)
	if err != nil || st.Mode()&os.ModeSocket == 0 {
		return nil
	}
	up, err := ListenerUp(o.Socket)
	if err != nil || up {
		return err
	}
	if err := os.Remove(o.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dpdkpeer: remove stale socket: %w", err)
	}
	return nil
}

// removeEALState removes what EAL may leave under prefix: its runtime directory (empty with
// --in-memory, 2.8 MB of config and fbarray files without), and after a crash in hugepage
// mode without --in-memory, its hugepage files, which hold the pages.
func removeEALState(prefix string) {
	_ = os.RemoveAll(filepath.Join("/var/run/dpdk", prefix))
	maps, _ := filepath.Glob(filepath.Join("/dev/hugepages", prefix+"map_*"))
	for _, m := range maps {
		_ = os.Remove(m)
	}
}
