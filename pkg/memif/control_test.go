package memif_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

func open(t *testing.T, cfg memif.Config) *memif.Interface {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = memiftest.QuietLogger()
	}
	i, err := memif.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { i.Close() })
	return i
}

func waitUp(t *testing.T, i *memif.Interface) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return i.WaitUp(ctx)
}

// waitReconnected waits for a redialling client to be up again. Not WaitUp: a server that is
// closing still accepts until its listener goes, and refuses a client that dials in that window
// with "ID not found"; WaitUp returns that refusal of the latest attempt, though the client goes
// on retrying and meets the next server (CI saw this in TestZeroCopyReleaseDuringDisconnect).
func waitReconnected(t *testing.T, cli *memif.Interface) {
	t.Helper()
	waitFor(t, cli, "client up again", cli.Up)
}

// waitFor waits at most 10 s for cond, taking i.Changed() before each look: a change between
// the look and the wait is not the next one, and a server's link may not change again.
func waitFor(t *testing.T, i *memif.Interface, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := i.Changed()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// exchange checks that one packet gets through each way.
func exchange(t *testing.T, a, b *memif.Interface) {
	t.Helper()
	buf := [][]byte{make([]byte, 0, 2048)}
	for _, ends := range [][2]*memif.Interface{{a, b}, {b, a}} {
		msg := []byte(fmt.Sprintf("from %p", ends[0]))
		if n := ends[0].TxQueue(0).TxBurst([][]byte{msg}); n != 1 {
			t.Fatalf("TxBurst = %d", n)
		}
		deadline := time.Now().Add(5 * time.Second)
		for ends[1].RxQueue(0).RxBurst(buf) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("packet did not arrive")
			}
		}
		if !bytes.Equal(buf[0], msg) {
			t.Fatalf("got %q want %q", buf[0], msg)
		}
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		name           string
		server, client memif.Config
		reason         string
	}{
		{"wrong secret", memif.Config{Secret: "right"}, memif.Config{Secret: "wrong"}, "Incorrect secret"},
		{"missing secret", memif.Config{Secret: "right"}, memif.Config{}, "Secret required"},
		{"unknown id", memif.Config{ID: 1}, memif.Config{ID: 2}, "ID not found"},
		{"mode mismatch", memif.Config{Mode: memif.ModeIP}, memif.Config{}, "mode mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := memiftest.UniqueSocket()
			tc.server.Role, tc.server.Socket = memif.RoleServer, addr
			tc.client.Role, tc.client.Socket = memif.RoleClient, addr
			srv := open(t, tc.server)
			cli := open(t, tc.client)
			err := waitUp(t, cli)
			var pe *memif.PeerError
			if !errors.As(err, &pe) || !strings.Contains(pe.Reason, tc.reason) {
				t.Fatalf("WaitUp = %v, want a peer refusal %q", err, tc.reason)
			}
			if srv.Up() {
				t.Fatal("server up after refusing")
			}
		})
	}
	// A server without a secret accepts a client that sends one, as libmemif and DPDK do.
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, Secret: "any"})
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, cli)
}

func TestRightSecretConnects(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{Secret: "0123456789abcdef0123456"}, memif.Config{Secret: "0123456789abcdef0123456"})
	exchange(t, srv, cli)
}

func TestAlreadyConnected(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{}, memif.Config{})
	second := open(t, memif.Config{Role: memif.RoleClient, Socket: srv.Config().Socket})
	var pe *memif.PeerError
	if err := waitUp(t, second); !errors.As(err, &pe) || pe.Reason != "Already connected" {
		t.Fatalf("second client: %v", err)
	}
	exchange(t, srv, cli) // the first connection is unharmed
}

// TestManyInterfacesOneSocket connects 16 ids on one socket at the same time.
func TestManyInterfacesOneSocket(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "memif.sock")
	const n = 16
	var srvs, clis []*memif.Interface
	for id := range uint32(n) {
		srvs = append(srvs, open(t, memif.Config{Role: memif.RoleServer, Socket: addr, ID: id}))
	}
	if _, err := memif.Open(memif.Config{Role: memif.RoleServer, Socket: addr, ID: 3, Logger: memiftest.QuietLogger()}); err == nil {
		t.Fatal("duplicate id on one socket accepted")
	}
	for id := range uint32(n) {
		clis = append(clis, open(t, memif.Config{Role: memif.RoleClient, Socket: addr, ID: id, Name: fmt.Sprintf("cli%d", id)}))
	}
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := waitUp(t, clis[k]); err != nil {
				t.Error(err)
			}
			if err := waitUp(t, srvs[k]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for k := range n {
		if link, _ := srvs[k].Link(); link.PeerName != fmt.Sprintf("cli%d", k) {
			t.Errorf("server id %d is linked to %q", k, link.PeerName)
		}
		exchange(t, srvs[k], clis[k])
	}
	// The socket file stays until the last server interface on it closes.
	for k := range n - 1 {
		srvs[k].Close()
	}
	if _, err := os.Stat(addr); err != nil {
		t.Fatalf("socket gone with one interface left: %v", err)
	}
	srvs[n-1].Close()
	if _, err := os.Stat(addr); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left after the last server closed: %v", err)
	}
}

func TestQueueAndRingNegotiation(t *testing.T) {
	srv, cli := memiftest.Pair(t,
		memif.Config{RxQueues: 2, TxQueues: 3},
		memif.Config{RxQueues: 4, TxQueues: 4, RingSize: 512})
	cl, _ := cli.Link()
	sl, _ := srv.Link()
	if cl.TxQueues != 2 || cl.RxQueues != 3 || sl.RxQueues != 2 || sl.TxQueues != 3 || cl.RingSize != 512 || sl.RingSize != 512 {
		t.Fatalf("client link %+v, server link %+v", cl, sl)
	}
	if cli.TxQueue(3).Up() || !cli.TxQueue(1).Up() {
		t.Fatal("queues beyond the negotiated count must stay down")
	}
	if n := cli.TxQueue(3).TxBurst([][]byte{{1}}); n != 0 {
		t.Fatal("a down queue took a packet")
	}
}

func TestCloseSendsReasonAndClientReconnects(t *testing.T) {
	addr := memiftest.UniqueSocket()
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, ReconnectInterval: 50 * time.Millisecond})
	for range 5 {
		srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
		waitReconnected(t, cli)
		if err := waitUp(t, srv); err != nil {
			t.Fatal(err)
		}
		exchange(t, srv, cli)
		changed := cli.Changed()
		srv.Close()
		<-changed
		waitFor(t, cli, "client down", func() bool { return !cli.Up() })
		var pe *memif.PeerError
		if err := cli.Err(); !errors.As(err, &pe) || pe.Reason != "interface closed" {
			t.Fatalf("client saw %v, want the server's reason", err)
		}
		if cli.TxQueue(0).TxBurst([][]byte{{1}}) != 0 {
			t.Fatal("down queue took a packet")
		}
	}
}

func TestClientCloseTellsServer(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{}, memif.Config{})
	changed := srv.Changed()
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	<-changed
	var pe *memif.PeerError
	if err := srv.Err(); srv.Up() || !errors.As(err, &pe) || pe.Reason != "interface closed" {
		t.Fatalf("server up=%v err=%v", srv.Up(), err)
	}
	// The server takes the next client for the same id.
	cli2 := open(t, memif.Config{Role: memif.RoleClient, Socket: srv.Config().Socket})
	if err := waitUp(t, cli2); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, cli2)
	if err := cli.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := cli.WaitUp(context.Background()); !errors.Is(err, memif.ErrClosed) {
		t.Fatalf("WaitUp after Close = %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []memif.Config{
		{RingSize: 3}, {RingSize: 1}, {RingSize: 1 << 16}, {BufferSize: -1}, {BufferSize: memif.MaxBufferSize + 1}, {RxQueues: 256}, {TxQueues: -1},
		{Secret: strings.Repeat("s", 24)}, {Name: strings.Repeat("n", 32)}, {Mode: 3}, {CacheLine: 32},
		{Socket: "/" + strings.Repeat("x", 120)}, {Role: 5},
		{RxQueues: 255, TxQueues: 255, RingSize: 1 << 15, BufferSize: 2048}, // over 4 GiB
	}
	for _, cfg := range bad {
		if i, err := memif.Open(cfg); err == nil {
			i.Close()
			t.Errorf("Open(%+v) accepted", cfg)
		} else if !strings.HasPrefix(err.Error(), "memif config: ") {
			t.Errorf("error %q lacks context", err)
		}
	}
}

func TestCacheLine128(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{CacheLine: 128}, memif.Config{CacheLine: 128})
	exchange(t, srv, cli)
}

func TestClientWaitsForServer(t *testing.T) {
	addr := memiftest.UniqueSocket()
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, ReconnectInterval: 20 * time.Millisecond})
	// Several failed dials are recorded, not fatal.
	waitFor(t, cli, "a failed dial recorded", func() bool { return cli.Err() != nil })
	if cli.Up() {
		t.Fatal("up without a server")
	}
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, cli)
}
