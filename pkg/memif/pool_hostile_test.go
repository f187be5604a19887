package memif_test

// A zero-copy Pool is one memfd, and every peer it is announced to maps all of it. Shared between
// the interfaces of a forwarder whose peers are different tenants, it would let the peer of one
// link read and rewrite the frames of the other, with no descriptor pointing at them.

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/socket"
)

// sharedPoolAttack is what the hostile peer of link A achieved against link B.
type sharedPoolAttack struct {
	refused  bool // Open refused B on A's pool (ErrPoolShared): B got a pool of its own
	read     bool // found B's received frame in its mapping
	forgedRx bool // B's application received the frame as the attacker rewrote it
	read2    bool // found B's outgoing frame in its mapping
	forgedTx bool // B's peer received B's outgoing frame as the attacker rewrote it
}

// playSharedPoolAttack builds a forwarder's two zero-copy client interfaces: A, on pool, whose
// server is the attacker (a raw peer that maps every region A announces through the real
// handshake), and B, with cfgB, whose server is an honest memif server; if Open refuses B on A's
// pool, B gets its own pool, as it does by default. B's server sends B a
// frame and B's application sends one back; between each send and its receipt the attacker
// looks for the frame in its mapping of A's pool and, where it finds it, rewrites it.
func playSharedPoolAttack(t *testing.T, pool *memif.Pool, cfgB memif.Config) sharedPoolAttack {
	t.Helper()
	addrA := memiftest.UniqueSocket()
	lnA, err := socket.Listen(addrA)
	if err != nil {
		t.Fatal(err)
	}
	defer lnA.Close()
	a := open(t, memif.Config{Role: memif.RoleClient, Socket: addrA, Name: "a", ZeroCopy: true, RingSize: 16, Pool: pool})
	attacker := acceptClient(t, lnA)
	if err := waitUp(t, a); err != nil {
		t.Fatal(err)
	}
	if len(attacker.regs) != 2 {
		t.Fatalf("A announced %d regions, want rings and pool", len(attacker.regs))
	}
	mem := attacker.regs[1].Mem // A's pool, as the attacker maps it

	sockB := memiftest.UniqueSocket()
	srvB := open(t, memif.Config{Role: memif.RoleServer, Socket: sockB})
	cfgB.Role, cfgB.Socket, cfgB.Name, cfgB.ZeroCopy, cfgB.RingSize = memif.RoleClient, sockB, "b", true, 16
	cfgB.Logger = memiftest.QuietLogger()
	var got sharedPoolAttack
	b, err := memif.Open(cfgB)
	if errors.Is(err, memif.ErrPoolShared) {
		got.refused = true
		cfgB.Pool = nil
		b, err = memif.Open(cfgB)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, i := range []*memif.Interface{srvB, b} {
		if err := waitUp(t, i); err != nil {
			t.Fatal(err)
		}
	}

	rewrite := func(frame []byte) (found bool) {
		at := bytes.Index(mem, frame)
		if at < 0 {
			return false
		}
		copy(mem[at:], bytes.Repeat([]byte{'X'}, len(frame)))
		return true
	}
	buf := [][]byte{make([]byte, 0, 256)}

	// B receives: the server's TxBurst has copied the frame into B's receive buffer when it returns.
	in := []byte("link B, received: a tenant's secret")
	if n := srvB.TxQueue(0).TxBurst([][]byte{in}); n != 1 {
		t.Fatalf("B's server sent %d frames", n)
	}
	got.read = rewrite(in)
	if n := b.RxQueue(0).RxBurst(buf); n != 1 {
		t.Fatalf("B received %d frames", n)
	}
	got.forgedRx = !bytes.Equal(buf[0], in)

	// B sends: its TxBurst has copied the frame into a pool buffer and published it when it returns.
	out := []byte("link B, sent: a tenant's reply")
	if n := b.TxQueue(0).TxBurst([][]byte{out}); n != 1 {
		t.Fatalf("B sent %d frames", n)
	}
	got.read2 = rewrite(out)
	if n := srvB.RxQueue(0).RxBurst(buf); n != 1 {
		t.Fatalf("B's server received %d frames", n)
	}
	got.forgedTx = !bytes.Equal(buf[0], out)
	return got
}

// TestAttackSharedPoolPeerReadsOtherLink (docs/security.md row 35): the peer of a forwarder's
// link A maps the pool A announces and reads and rewrites the frames of link B, received and
// sent, when A and B share the pool. A Pool without PeersTrustEachOther serves one interface: the
// second Open fails with ErrPoolShared, and B on a pool of its own (what it gets by default) is
// out of the attacker's reach. With PeersTrustEachOther the same attack works, as documented: the
// negative control that shows the attack is real.
func TestAttackSharedPoolPeerReadsOtherLink(t *testing.T) {
	newPool := func(t *testing.T, trusted bool) *memif.Pool {
		p, err := memif.NewPool(memif.PoolConfig{Name: "nf", Pairs: 1, Buffers: 5 * 16, BufferSize: 256, PeersTrustEachOther: trusted})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // after the interfaces, which are opened later
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		})
		return p
	}
	t.Run("default pool", func(t *testing.T) {
		pool := newPool(t, false)
		got := playSharedPoolAttack(t, pool, memif.Config{Pool: pool})
		if got != (sharedPoolAttack{refused: true}) {
			t.Fatalf("link A's peer reached link B through the shared pool: %+v", got)
		}
	})
	t.Run("trusted peers", func(t *testing.T) {
		pool := newPool(t, true)
		got := playSharedPoolAttack(t, pool, memif.Config{Pool: pool})
		if got != (sharedPoolAttack{false, true, true, true, true}) {
			t.Fatalf("with PeersTrustEachOther the peers share all frames, the attack got %+v", got)
		}
	})
}

// TestPoolServesOneInterface: a Pool without PeersTrustEachOther refuses a second interface with
// ErrPoolShared, naming both, also after the first closed (its peer may keep its mapping), and
// the refused Open leaves nothing behind: the pool closes.
func TestPoolServesOneInterface(t *testing.T) {
	pool, err := memif.NewPool(memif.PoolConfig{Name: "nf", Pairs: 1, Buffers: 64, BufferSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	cfg := memif.Config{Role: memif.RoleClient, ZeroCopy: true, RingSize: 16, Pool: pool, Logger: memiftest.QuietLogger()}
	first := cfg
	first.Name, first.Socket = "east", memiftest.UniqueSocket()
	a, err := memif.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	second := cfg
	second.Name, second.Socket = "west", memiftest.UniqueSocket()
	for _, when := range []string{"while the first is open", "after the first closed"} {
		b, err := memif.Open(second)
		if !errors.Is(err, memif.ErrPoolShared) || !strings.Contains(err.Error(), `memif west: pool "nf" was given to interface "east"`) {
			if b != nil {
				b.Close()
			}
			t.Fatalf("%s: Open of a second interface: %v, want ErrPoolShared naming both", when, err)
		}
		if when == "while the first is open" {
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pool.Close(); err != nil {
		t.Fatalf("pool close after a refused Open: %v", err)
	}
}
