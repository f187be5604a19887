package memif_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// envEchoServer makes the test binary, re-executed, a memif echo server on that socket.
const envEchoServer = "MEMIF_TEST_ECHO_SERVER"

func TestMain(m *testing.M) {
	if addr := os.Getenv(envEchoServer); addr != "" {
		os.Exit(runEchoServer(addr))
	}
	os.Exit(m.Run())
}

// runEchoServer echoes every packet until killed. It prints "listening" once the socket is bound.
func runEchoServer(addr string) int {
	srv, err := memif.Open(memif.Config{Role: memif.RoleServer, Socket: addr, Logger: memiftest.QuietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	bufs := make([][]byte, 32)
	for i := range bufs {
		bufs[i] = make([]byte, 0, 2048)
	}
	rx, tx := srv.RxQueue(0), srv.TxQueue(0)
	for ctx.Err() == nil {
		n, err := rx.RxBurstWait(ctx, bufs, 1000)
		if err != nil {
			// Down: wait for the next client. WaitUp, not <-srv.Changed(): a link that came up
			// between RxBurstWait's ErrDown and that call would be waited for until the next
			// change, which never comes (the client is up); the echo then timed out under load.
			_ = srv.WaitUp(ctx)
			continue
		}
		for sent := 0; sent < n; {
			sent += tx.TxBurst(bufs[sent:n])
		}
	}
	srv.Close()
	return 0
}

func startEchoServer(t *testing.T, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GOTRACEBACK=all: a SIGQUIT at a timeout (dumpBoth) dumps every goroutine of the server.
	cmd.Env = append(os.Environ(), envEchoServer+"="+addr, "GOTRACEBACK=all")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := out.Read(buf); err != nil || string(buf[:n]) != "listening\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("echo server did not start: %q %v", buf[:n], err)
	}
	return cmd
}

// TestReconnectAfterServerKill kills the server process with SIGKILL in the middle of traffic, 20
// times; each time a new server process starts and the client must be passing verified traffic
// again with its fd count unchanged, within one reconnect interval (the longest the client's
// back-off sleeps) and 2 s for the handshake and a round trip on a loaded machine.
func TestReconnectAfterServerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes: not in -short")
	}
	addr := memiftest.UniqueSocket()
	srv := startEchoServer(t, addr)
	defer func() { srv.Process.Kill(); srv.Wait() }()
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr})
	tx, rx := cli.TxQueue(0), cli.RxQueue(0)
	bufs := make([][]byte, 32)
	for i := range bufs {
		bufs[i] = make([]byte, 0, 2048)
	}
	seq := uint32(0)
	// roundTrip sends one verified packet and waits for it to come back.
	roundTrip := func(deadline time.Time) error {
		seq++
		p := make([]byte, 100)
		fill(p, seq)
		for tx.TxBurst([][]byte{p}) != 1 {
			if time.Now().After(deadline) {
				dumpBoth(t, srv, cli)
				return fmt.Errorf("send of packet %d timed out", seq)
			}
		}
		for {
			n := rx.RxBurst(bufs)
			for i := range n {
				if err := check(bufs[i], seq, 100); err == nil {
					return nil
				}
			}
			if time.Now().After(deadline) {
				dumpBoth(t, srv, cli)
				return fmt.Errorf("echo of packet %d timed out", seq)
			}
		}
	}
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	fds := fdCount(t)
	const recoveryBound = memif.DefaultReconnectInterval + 2*time.Second
	var worst time.Duration
	for round := range 20 {
		// Traffic in flight when the server dies.
		pkts := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}
		tx.TxBurst(pkts)
		srv.Process.Kill()
		srv.Wait()
		for {
			changed := cli.Changed() // before looking: a change from now on wakes us
			if !cli.Up() {
				break
			}
			<-changed
		}
		srv = startEchoServer(t, addr)
		restarted := time.Now()
		if err := waitUp(t, cli); err != nil {
			dumpBoth(t, srv, cli)
			t.Fatalf("round %d: %v", round, err)
		}
		if err := roundTrip(restarted.Add(recoveryBound)); err != nil {
			t.Fatalf("round %d: not back within %v of the restart: %v", round, recoveryBound, err)
		}
		worst = max(worst, time.Since(restarted))
		rx.RxBurst(bufs) // leftovers of the in-flight traffic
		if now := fdCount(t); now != fds {
			t.Fatalf("round %d: %d fds open, %d before: leak", round, now, fds)
		}
	}
	t.Logf("slowest recovery after a server restart: %v", worst)
}

// dumpBoth shows which side holds a packet that did not come back: the client's rings and every
// goroutine of this process in the log, and the echo server's goroutines (SIGQUIT) on stderr.
func dumpBoth(t *testing.T, srv *exec.Cmd, cli *memif.Interface) {
	t.Helper()
	rs, rok := cli.RxQueue(0).RingState()
	ts, tok := cli.TxQueue(0).RingState()
	t.Logf("%s: client rx ring %+v (up %v), tx ring %+v (up %v), last error %v",
		time.Now().Format("15:04:05.000"), rs, rok, ts, tok, cli.Err())
	buf := make([]byte, 1<<20)
	t.Logf("client goroutines:\n%s", buf[:runtime.Stack(buf, true)])
	if err := srv.Process.Signal(syscall.SIGQUIT); err == nil {
		srv.Wait() // the dump is written before it exits
	}
}
