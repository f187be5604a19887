package memif

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/socket"
)

// TestAcceptLoopOutlivesAnEmptySocket: a server socket may briefly have no interface on it: when
// the last interface is closing while another one opens on the same socket, and, before the fix,
// when registerServer had started its accept loop and not yet added the first interface. A
// client that dialled in that moment (every client retries, so one whose server restarts does)
// ended the accept loop for good: the listener stayed bound, clients' dials succeeded, and nobody
// ever answered them (TestReconnectAfterServerKill under load: "waiting for link up", the
// server's goroutine dump without an accept loop). The moment is played here deterministically:
// the socket is listening with no interface when the first client's connection is accepted.
func TestAcceptLoopOutlivesAnEmptySocket(t *testing.T) {
	addr := fmt.Sprintf("@memiftest-accept-%d", os.Getpid())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ln, err := socket.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &serverSocket{addr: addr, ln: ln, log: quiet, ifaces: map[uint32]*Interface{},
		conns: map[*socket.Conn]struct{}{}, serving: map[*Interface]*sync.WaitGroup{}}
	servers.Lock()
	servers.m[socketKey(addr)] = s
	servers.Unlock()
	s.wg.Add(1)
	go s.acceptLoop()

	// The early client: whatever the socket does with it (HELLO, or a close), once it has done
	// it the accept loop has taken the connection.
	early, err := socket.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = early.SetDeadline(time.Now().Add(10 * time.Second))
	if _, fd, err := early.Recv(); err != nil && os.IsTimeout(err) {
		t.Fatal("the accept loop did not take the early connection")
	} else if fd >= 0 {
		t.Fatalf("HELLO with an fd %d", fd)
	}
	early.Close()

	// Now an interface joins the socket (it finds the listener in servers) and a client dials it.
	srv, err := Open(Config{Role: RoleServer, Socket: addr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close() // the last interface: it closes the listener
	cli, err := Open(Config{Role: RoleClient, Socket: addr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cli.WaitUp(ctx); err != nil {
		t.Fatalf("a client of an interface that joined after the early connection: %v", err)
	}
	if err := srv.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
}
