package socket

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is one control channel: a connected SOCK_SEQPACKET socket. It is not safe for concurrent
// Recv calls, nor for concurrent Send calls; one Recv may run alongside one Send.
type Conn struct {
	c   *net.UnixConn
	buf [MsgSize + 1]byte // one spare byte exposes oversized datagrams
	oob []byte
}

// oobSize holds one SCM_RIGHTS fd and one SCM_CREDENTIALS (the listener sets SO_PASSCRED, so the
// kernel attaches credentials to each message), with room to spare so that a peer attaching a few
// extra fds is caught and its fds closed instead of silently truncated.
var oobSize = unix.CmsgSpace(4*8) + unix.CmsgSpace(unix.SizeofUcred)

// IsAbstract reports whether addr names an abstract socket ("@name").
func IsAbstract(addr string) bool { return strings.HasPrefix(addr, "@") }

// Dial connects to a memif control socket at a filesystem path or an abstract "@name".
func Dial(addr string) (*Conn, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: addr, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("dial memif socket %s: %w", addr, err)
	}
	return newConn(c), nil
}

func newConn(c *net.UnixConn) *Conn {
	return &Conn{c: c, oob: make([]byte, oobSize)}
}

// Send writes one message, with fd attached when fd >= 0. The caller keeps ownership of fd.
func (c *Conn) Send(m Msg, fd int) error {
	b := Encode(m)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	n, oobn, err := c.c.WriteMsgUnix(b[:], oob, nil)
	if err != nil {
		return fmt.Errorf("send %s: %w", m.Type(), err)
	}
	if n != MsgSize || oobn != len(oob) {
		return fmt.Errorf("send %s: short write (%d bytes, %d control bytes)", m.Type(), n, oobn)
	}
	return nil
}

// MalformedError is a datagram that is not a valid memif message: wrong size, unknown type,
// too many fds. The connection is usable afterwards, but a peer that sends one is broken.
type MalformedError struct{ Reason string }

func (e *MalformedError) Error() string { return e.Reason }

func malformed(format string, a ...any) error {
	return &MalformedError{Reason: fmt.Sprintf(format, a...)}
}

// Recv reads one message. fd is the descriptor that came with it, or -1; the caller owns it. A
// message with more than one fd, a truncated message or control part, or a malformed message is an
// error, and any fds received with it are closed. io.EOF means the peer closed the socket.
func (c *Conn) Recv() (m Msg, fd int, err error) {
	n, oobn, flags, _, err := c.c.ReadMsgUnix(c.buf[:], c.oob)
	fds := parseRights(c.oob[:oobn])
	closeAll := func() {
		for _, f := range fds {
			unix.Close(f)
		}
	}
	if err != nil {
		closeAll()
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil, -1, io.EOF
		}
		return nil, -1, fmt.Errorf("receive: %w", err)
	}
	if n == 0 {
		closeAll()
		return nil, -1, io.EOF
	}
	if flags&unix.MSG_CTRUNC != 0 {
		closeAll()
		return nil, -1, malformed("control data truncated (too many fds attached)")
	}
	if flags&unix.MSG_TRUNC != 0 {
		n = len(c.buf) // the datagram was larger than the buffer: reported as a size error below
	}
	if len(fds) > 1 {
		closeAll()
		return nil, -1, malformed("message carries %d fds, at most 1 allowed", len(fds))
	}
	m, err = Decode(c.buf[:n])
	if err != nil {
		closeAll()
		return nil, -1, &MalformedError{Reason: err.Error()}
	}
	fd = -1
	if len(fds) == 1 {
		fd = fds[0]
	}
	return m, fd, nil
}

// parseRights returns the fds of every SCM_RIGHTS message in oob, ignoring credentials.
func parseRights(oob []byte) []int {
	if len(oob) == 0 {
		return nil
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, cm := range cmsgs {
		if cm.Header.Level != unix.SOL_SOCKET || cm.Header.Type != unix.SCM_RIGHTS {
			continue
		}
		if r, err := unix.ParseUnixRights(&cm); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

// SetDeadline bounds the next Send and Recv calls; the zero time removes the bound.
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// SetReadDeadline sets the deadline of Recv only; a deadline in the past wakes a blocked Recv.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }

// PeerCred returns the credentials of the process at the other end.
func (c *Conn) PeerCred() (*unix.Ucred, error) {
	rc, err := c.c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// Close closes the socket; a blocked Recv returns.
func (c *Conn) Close() error { return c.c.Close() }

// Listener accepts memif control connections.
type Listener struct {
	l    *net.UnixListener
	addr string
}

// Listen binds a SOCK_SEQPACKET listener at a filesystem path or an abstract "@name". A leftover
// socket file that nobody listens on any more is replaced; a live one is an error.
func Listen(addr string) (*Listener, error) {
	if addr == "" || addr == "@" {
		return nil, errors.New("listen: empty socket address")
	}
	if !IsAbstract(addr) {
		if err := removeStaleSocket(addr); err != nil {
			return nil, err
		}
	}
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: addr, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("listen on memif socket %s: %w", addr, err)
	}
	// Closing the listener removes a filesystem socket only when we say so, in Close.
	l.SetUnlinkOnClose(false)
	// SO_PASSCRED as libmemif and DPDK set it: peers may expect credentials on messages.
	if rc, err := l.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
		})
	}
	return &Listener{l: l, addr: addr}, nil
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen on memif socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("listen on memif socket %s: path exists and is not a socket", path)
	}
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err == nil {
		c.Close()
		return fmt.Errorf("listen on memif socket %s: another process is listening there", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale memif socket %s: %w", path, err)
	}
	return nil
}

// Accept waits for the next connection.
func (l *Listener) Accept() (*Conn, error) {
	c, err := l.l.AcceptUnix()
	if err != nil {
		return nil, fmt.Errorf("accept on memif socket %s: %w", l.addr, err)
	}
	return newConn(c), nil
}

// Addr is the address the listener was created with.
func (l *Listener) Addr() string { return l.addr }

// Close stops listening and removes a filesystem socket file.
func (l *Listener) Close() error {
	err := l.l.Close()
	if !IsAbstract(l.addr) {
		if rmErr := os.Remove(l.addr); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
			err = rmErr
		}
	}
	return err
}
