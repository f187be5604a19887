package memif

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"time"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/socket"
)

// Role is the side of the memif connection. The client connects and owns the shared memory; the
// server listens and may host several interfaces (ids) on one socket. VPP and libmemif say slave
// for client and master for server.
type Role int

// Roles.
const (
	RoleClient Role = iota
	RoleServer
)

func (r Role) String() string {
	if r == RoleServer {
		return "server"
	}
	return "client"
}

// Mode is the interface mode announced by the client; a server accepts only its own mode.
type Mode uint8

// Modes of protocol 2.0.
const (
	ModeEthernet   Mode = Mode(socket.ModeEthernet)
	ModeIP         Mode = Mode(socket.ModeIP)
	ModePuntInject Mode = Mode(socket.ModePuntInject)
)

func (m Mode) String() string {
	switch m {
	case ModeEthernet:
		return "ethernet"
	case ModeIP:
		return "ip"
	case ModePuntInject:
		return "punt-inject"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Defaults shared with libmemif, VPP and DPDK.
const (
	DefaultSocket            = "/run/vpp/memif.sock"
	DefaultRingSize          = 1024
	DefaultBufferSize        = 2048
	DefaultReconnectInterval = time.Second
	DefaultHandshakeTimeout  = 5 * time.Second
	DefaultMaxSleep          = 100 * time.Millisecond
	// DefaultMaxRegionBytes bounds the shared memory one client may make a server map: 256 MiB
	// holds 32 queue pairs of 1024-slot rings with 2048-byte buffers (DPDK's, VPP's and libmemif's
	// defaults are one pair, 4.2 MiB).
	DefaultMaxRegionBytes = 256 << 20
	MaxQueues             = 255 // libmemif counts rings in a byte
)

// MinBufferSize and MaxBufferSize bound Config.BufferSize and PoolConfig.BufferSize. A buffer
// holds at least one byte, which is all the protocol needs: longer packets are chained, and the
// layout puts buffers at any byte offset (DPDK's net_memif and libmemif take sizes below 64 too).
// Descriptors carry 32-bit lengths, so Go-to-Go links may use buffers up to MaxBufferSize, but
// DPDK's net_memif and libmemif take 16-bit buffer sizes: a link to them needs at most 65535, the
// bound of the Kubernetes contract (portspec.MaxBufferSize).
const (
	MinBufferSize = 1
	MaxBufferSize = 65535 * 16
)

// Config describes one memif interface.
type Config struct {
	Role   Role
	Socket string // filesystem path, or "@name" for an abstract socket; default DefaultSocket
	ID     uint32 // interface id, unique per socket and role
	Secret string // at most 23 bytes; a server with a secret refuses clients without it
	Mode   Mode

	Name string // interface name sent in CONNECT/CONNECTED (default "memif<ID>")
	// StatusDir, when set, is where the interface keeps its status file (portstatus.File) up
	// to date for the node agent: the port's slot. PortConfig sets it to port.json's directory.
	StatusDir string
	AppName   string // application name sent in HELLO/INIT (default "memifnet")

	// Queue counts from this side's point of view. A client asks for them and gets at most what
	// the server offers; a server offers them.
	RxQueues, TxQueues int // default 1 each

	// RingSize (entries, a power of two, 2..32768) and BufferSize (bytes) size the memory a client
	// creates. A server follows the client's choice.
	RingSize   int
	BufferSize int

	// CacheLine is the ring header layout: 64 (x86-64 and most peers) or 128 (VPP and generic DPDK
	// builds on arm64).
	CacheLine int

	// ZeroCopy (client only; a server copies, as in DPDK and VPP) points descriptors straight at
	// the interface's buffer pool: RxBurstZC hands out views of shared memory, TxBurstZC sends
	// pool buffers without a copy. RxBurst and TxBurst still work and copy through the pool.
	ZeroCopy bool
	// Pool, with ZeroCopy, is the buffer pool to use instead of a private one (see Pool): share one
	// between interfaces to forward between them without copying. BufferSize defaults to the
	// pool's and must equal it; the queue counts must not exceed its pairs.
	Pool *Pool

	// Memory backs a client's region: hugepages when available by default. A zero-copy pool is
	// always ordinary memory (see PoolConfig.Memory).
	Memory alloc.Backing
	// NewRegion, when set, creates a client's region instead of alloc.NewRegion with Memory: for
	// example alloc.OpenFileRegion on a hugepage pool unit the device plugin granted. It must return
	// a region of at least size bytes whose fd the peer can map. The region is closed when the
	// connection ends and created anew for the next one. With ZeroCopy it creates the private
	// pool instead, which must be a region that cannot fault (PoolConfig.NewRegion).
	NewRegion func(name string, size int) (*alloc.Region, error)

	// MaxRegionBytes (server) bounds the bytes of all regions one client connection announces,
	// which this server maps: a client whose regions are sparse (pages it never touched, or holes
	// it punched later) makes the server's memory cgroup pay for every such page the server's
	// bursts touch, up to this much per connection. A client announcing more is refused with a
	// DISCONNECT naming the limit. Default DefaultMaxRegionBytes; PortConfig raises it to what a
	// client with the port's own sizes needs.
	MaxRegionBytes uint64

	// ReconnectInterval caps how long a client waits before dialling again after the server went
	// away, refused it, or could not be reached: retries start after 50 ms and double up to it.
	ReconnectInterval time.Duration
	// HandshakeTimeout bounds each step of the handshake, so a peer that stalls cannot hold an id.
	HandshakeTimeout time.Duration
	// MaxSleep bounds one RxQueue.Wait (default 100 ms). A peer that publishes without a full
	// barrier between its index store and its MASK_INT load (DPDK's transmit path has none) can
	// miss our unmasking and not signal; waking this often turns that into a late poll, not a stall.
	MaxSleep time.Duration

	Logger *slog.Logger
}

// withDefaults returns a validated copy of c with defaults filled in.
func (c Config) withDefaults() (Config, error) {
	c = c.filled()
	if err := errors.Join(c.problems()...); err != nil {
		return c, fmt.Errorf("memif config: %w", err)
	}
	if c.Role == RoleClient {
		// The client's region holds every ring and, in copy mode, one buffer per ring slot; keep it
		// addressable by the protocol's 32-bit offsets.
		if total := regionSize(c.TxQueues, c.RxQueues, c.log2RingSize(), c.BufferSize, c.CacheLine); total > 1<<32-1 {
			return c, fmt.Errorf("memif config: %d queues x %d slots x %d-byte buffers need %d bytes, over the 4 GiB a region can address",
				c.RxQueues+c.TxQueues, c.RingSize, c.BufferSize, total)
		}
	}
	return c, nil
}

// filled is c with every unset field at its default.
func (c Config) filled() Config {
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if c.Name == "" {
		c.Name = fmt.Sprintf("memif%d", c.ID)
	}
	if c.AppName == "" {
		c.AppName = "memifnet"
	}
	if c.RxQueues == 0 {
		c.RxQueues = 1
	}
	if c.TxQueues == 0 {
		c.TxQueues = 1
	}
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
	}
	if c.BufferSize == 0 && c.Pool != nil {
		c.BufferSize = c.Pool.bufSize
	}
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.CacheLine == 0 {
		c.CacheLine = 64
	}
	if c.MaxRegionBytes == 0 {
		c.MaxRegionBytes = DefaultMaxRegionBytes
	}
	if c.ReconnectInterval == 0 {
		c.ReconnectInterval = DefaultReconnectInterval
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.MaxSleep == 0 {
		c.MaxSleep = DefaultMaxSleep
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// problems lists what is wrong with a filled-in c, one error per field.
func (c Config) problems() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Role != RoleClient && c.Role != RoleServer {
		bad("role %d: must be client or server", c.Role)
	}
	if len(c.Socket) > 107 {
		bad("socket %q: longer than the 107 bytes a Unix socket address holds", c.Socket)
	}
	if len(c.Secret) >= socket.SecretSize {
		bad("secret: %d bytes, at most %d", len(c.Secret), socket.SecretSize-1)
	}
	if len(c.Name) >= socket.NameSize {
		bad("name %q: at most %d bytes", c.Name, socket.NameSize-1)
	}
	if len(c.AppName) >= socket.NameSize {
		bad("app name %q: at most %d bytes", c.AppName, socket.NameSize-1)
	}
	if c.Mode > ModePuntInject {
		bad("mode %d: must be ethernet, ip or punt-inject", c.Mode)
	}
	if c.RxQueues < 1 || c.RxQueues > MaxQueues {
		bad("rx queues %d: must be 1..%d", c.RxQueues, MaxQueues)
	}
	if c.TxQueues < 1 || c.TxQueues > MaxQueues {
		bad("tx queues %d: must be 1..%d", c.TxQueues, MaxQueues)
	}
	if c.RingSize < 2 || c.RingSize > 1<<ring.MaxLog2Size || c.RingSize&(c.RingSize-1) != 0 {
		bad("ring size %d: must be a power of two from 2 to %d", c.RingSize, 1<<ring.MaxLog2Size)
	}
	if c.BufferSize < MinBufferSize || c.BufferSize > MaxBufferSize {
		bad("buffer size %d: must be %d..%d", c.BufferSize, MinBufferSize, MaxBufferSize)
	}
	if c.CacheLine != 64 && c.CacheLine != 128 {
		bad("cache line %d: must be 64 or 128", c.CacheLine)
	}
	if c.ReconnectInterval < 0 || c.HandshakeTimeout < 0 || c.MaxSleep < 0 {
		bad("reconnect interval, handshake timeout and max sleep must not be negative")
	}
	if p := c.Pool; p != nil {
		switch {
		case !c.ZeroCopy || c.Role != RoleClient:
			bad("pool: only for a zero-copy client")
		case c.BufferSize != p.bufSize:
			bad("buffer size %d: the pool's buffers are %d bytes", c.BufferSize, p.bufSize)
		case c.RxQueues > len(p.shares) || c.TxQueues > len(p.shares):
			bad("queues %d rx, %d tx: the pool has %d pairs", c.RxQueues, c.TxQueues, len(p.shares))
		}
	}
	return errs
}

func (c Config) log2RingSize() uint8 { return uint8(bits.TrailingZeros(uint(c.RingSize))) }

// regionSize is the byte size of a client's copy-mode region: rings first, then buffers.
func regionSize(s2m, m2s int, log2 uint8, bufSize, cacheLine int) uint64 {
	rings := uint64(s2m+m2s) * uint64(ring.Size(log2, cacheLine))
	return rings + uint64(s2m+m2s)<<log2*uint64(bufSize)
}
