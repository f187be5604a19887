package socket

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/testutil"
)

var seq atomic.Int64

func abstractAddr() string { return fmt.Sprintf("@socket-test-%d-%d", os.Getpid(), seq.Add(1)) }

func pair(t *testing.T, addr string) (server, client *Conn) {
	t.Helper()
	l, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan *Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err = Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestSendRecvWithFd(t *testing.T) {
	for _, addr := range []string{abstractAddr(), filepath.Join(t.TempDir(), "memif.sock")} {
		t.Run(addr, func(t *testing.T) {
			srv, cli := pair(t, addr)
			fd, err := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if _, err := unix.Write(fd, []byte("payload")); err != nil {
				t.Fatal(err)
			}
			if err := cli.Send(AddRegion{Index: 0, Size: 7}, fd); err != nil {
				t.Fatal(err)
			}
			m, got, err := srv.Recv()
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(got)
			if m != (AddRegion{Index: 0, Size: 7}) || got < 0 {
				t.Fatalf("got %#v fd %d", m, got)
			}
			buf := make([]byte, 7)
			if _, err := unix.Pread(got, buf, 0); err != nil || string(buf) != "payload" {
				t.Fatalf("passed fd reads %q, %v", buf, err)
			}
			if err := srv.Send(Ack{}, -1); err != nil {
				t.Fatal(err)
			}
			if m, fd, err := cli.Recv(); err != nil || m != (Ack{}) || fd != -1 {
				t.Fatalf("ack: %#v %d %v", m, fd, err)
			}
			cred, err := srv.PeerCred()
			if err != nil || int(cred.Pid) != os.Getpid() {
				t.Fatalf("peer cred %+v %v", cred, err)
			}
			cli.Close()
			if _, _, err := srv.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("after peer close: %v", err)
			}
		})
	}
}

// rawPeer is a SOCK_SEQPACKET client that can send anything.
func rawPeer(t *testing.T, addr string) (int, *Conn) {
	t.Helper()
	l, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: addr}); err != nil {
		t.Fatal(err)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return fd, c
}

func openFds(t *testing.T) int {
	t.Helper()
	return testutil.OpenFds(t)
}

func TestRecvRejectsBadDatagrams(t *testing.T) {
	fd, c := rawPeer(t, abstractAddr())
	efd1, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	efd2, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	defer unix.Close(efd1)
	defer unix.Close(efd2)
	before := openFds(t)
	good := Encode(Ack{})
	cases := []struct {
		name string
		data []byte
		oob  []byte
		want string
	}{
		{"short", good[:100], nil, "size"},
		{"long", append(good[:], 0, 0), nil, "size"},
		{"two fds", good[:], unix.UnixRights(efd1, efd2), "2 fds"},
		{"oversized with fd", make([]byte, 300), unix.UnixRights(efd1), "size"},
	}
	for _, tc := range cases {
		if err := unix.Sendmsg(fd, tc.data, tc.oob, nil, 0); err != nil {
			t.Fatalf("%s: send: %v", tc.name, err)
		}
		_, got, err := c.Recv()
		if err == nil || got != -1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Recv = fd %d, %v; want error with %q", tc.name, got, err, tc.want)
		}
	}
	// Every fd that arrived with a rejected message was closed again.
	if after := openFds(t); after != before {
		t.Errorf("fd count %d -> %d: received fds leaked", before, after)
	}
}

func TestListenStaleAndLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memif.sock")
	// A stale socket file (nobody listening) is replaced.
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket should exist: %v", err)
	}
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("listen over stale socket: %v", err)
	}
	// A live one is not stolen.
	if _, err := Listen(path); err == nil {
		t.Fatal("second listener on a live socket succeeded")
	}
	l.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Close left the socket file: %v", err)
	}
	// A regular file is never removed.
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil {
		t.Fatal("listen over a regular file succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "data" {
		t.Fatal("regular file was touched")
	}
}
