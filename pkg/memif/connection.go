package memif

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/socket"
)

// connection holds what one established (or establishing) memif connection owns: the control
// socket, the mapped regions and the rings with their eventfds. close releases all of it.
type connection struct {
	ctl     *socket.Conn
	regions []*alloc.Region
	pool    *alloc.Region // zero-copy: the interface's buffer pool, one of regions, not ours to close
	s2m     []ringInfo    // client -> server rings
	m2s     []ringInfo    // server -> client rings

	// own-buffer layout (client): buffers of ring i of direction d start at bufBase[d][i]
	bufSize uint32

	peerName, peerApp string

	brk  *breaker   // ends the connection from the data path (a fault, a bad eventfd)
	trap *faultTrap // nil when no region can fault

	armed []zcArmed // zero-copy client: M2S rings armed before CONNECT, until attach takes them
}

type ringInfo struct {
	r       ring.Ring
	eventfd int             // the ring's interrupt eventfd, owned by efile
	efile   *os.File        // eventfd in the Go runtime's poller, so a sleeping receiver holds no thread
	erc     syscall.RawConn // efile's, for reads that never block (interrupt.go)
	bufBase uint32          // client only: offset of this ring's first buffer in region 0
}

// newRingInfo wraps the ring's eventfd for the runtime poller. It takes ownership of efd. The
// poller takes only a non-blocking fd, and the flag lives in the open file description the peer
// shares: every memif implementation creates it non-blocking (EFD_NONBLOCK), a peer that clears
// it between our fcntl and os.NewFile leaves a file the poller refused, which is refused here.
// Later changes of the flag do not matter: nothing reads or writes the fd in a way that blocks.
func newRingInfo(r ring.Ring, efd int, bufBase uint32) (ringInfo, error) {
	if err := unix.SetNonblock(efd, true); err != nil {
		unix.Close(efd)
		return ringInfo{}, fmt.Errorf("ring eventfd: %w", err)
	}
	f := os.NewFile(uintptr(efd), "memif-eventfd")
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return ringInfo{}, fmt.Errorf("ring eventfd: not pollable (the peer cleared O_NONBLOCK on it): %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return ringInfo{}, fmt.Errorf("ring eventfd: %w", err)
	}
	return ringInfo{r: r, eventfd: efd, efile: f, erc: rc, bufBase: bufBase}, nil
}

// checkEventfd refuses an fd that is not an eventfd. The kernel names the fd's kind in
// /proc/self/fd; where /proc is not mounted, only an fd that is no anonymous inode at all (a file,
// a pipe, a socket) can be told apart, and is refused.
func checkEventfd(fd int) error {
	if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil {
		if target != "anon_inode:[eventfd]" {
			return fmt.Errorf("it is %s, not an eventfd", target)
		}
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != 0 {
		return fmt.Errorf("it is a file of mode %#o, not an eventfd", st.Mode)
	}
	return nil
}

func (c *connection) mems() [][]byte {
	m := make([][]byte, len(c.regions))
	for i, r := range c.regions {
		m[i] = r.Mem
	}
	return m
}

// close releases every resource. The queues must have been parked first.
func (c *connection) close() error {
	var errs []error
	if c.ctl != nil {
		// Close may have shut the socket already to wake the goroutine that gets here.
		if err := c.ctl.Close(); !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, rs := range [][]ringInfo{c.s2m, c.m2s} {
		for _, r := range rs {
			if r.efile != nil {
				errs = append(errs, r.efile.Close())
			}
		}
	}
	c.returnArmedZC()
	for _, r := range c.regions {
		if r != c.pool {
			errs = append(errs, r.Close())
		}
	}
	c.s2m, c.m2s, c.regions = nil, nil, nil
	return errors.Join(errs...)
}
