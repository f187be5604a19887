package memif

import (
	"errors"
	"fmt"
	"sync"

	"github.com/memifnet/memifnet/pkg/alloc"
)

// zcShare is one queue pair's share of the pool.
//
// Its free list has more than one user: the queue pair's owner (bursts, Release, Alloc), the
// control goroutine of every interface on the pool (arming a new connection's receive rings,
// recovering a dead connection's buffers), and, with a shared Pool, the owners' queue pairs k of
// the other interfaces, whose control goroutines run on their own. mu orders them. The data path
// takes it once per call (a burst, a Release, an Alloc), never per packet; it is contended only
// for the microseconds a connect or disconnect touches the share. Lock order: a queue's guard
// first, then mu.
type zcShare struct {
	mem     []byte // the whole pool region
	bufSize uint32
	mu      sync.Mutex
	free    *alloc.Pool // guarded by mu
}

// view is buffer idx as a slice of n bytes whose capacity ends at the buffer's end.
func (p *zcShare) view(idx, n uint32) []byte {
	off := p.free.Offset(idx)
	return p.mem[off : off+n : off+p.bufSize]
}

// Pool is the buffer pool of zero-copy client interfaces, announced to each peer as region 1.
// Open creates a private one for an interface with Config.ZeroCopy. A Pool is one memory region,
// and every peer it is announced to maps all of it: the peer of an interface can read and rewrite
// every buffer of the pool at any time, with no descriptor pointing at it. So by default a Pool
// serves one interface for its whole life (a peer keeps its mapping after it disconnects), and
// Open refuses a second one (ErrPoolShared): each interface's peer maps only its own buffers, and
// Forward between interfaces of different pools copies each packet once.
//
// With PoolConfig.PeersTrustEachOther, put it in the Config of several interfaces to forward
// between them without copying (an l2fwd): a buffer received on interface A's RxQueue k can be
// sent on interface B's TxQueue k, and when B's peer releases it, it goes back to share k, from
// which A's RxQueue k re-arms its ring. That is Tx-to-Rx recycling with no structure shared
// between data-path goroutines in between, which requires that queue pairs k of all interfaces of
// a pool are used from one goroutine (share k's lock, taken once per call, only orders them with
// the control goroutines). The price is that every peer sees every other peer's frames.
type Pool struct {
	region  *alloc.Region
	shares  []*zcShare
	bufSize int
	private bool // created by Open for one interface: closed with it

	name    string
	trusted bool // PoolConfig.PeersTrustEachOther

	mu     sync.Mutex
	users  int
	joined bool   // an interface has used the pool
	first  string // the first interface that did
	closed bool
}

// PoolConfig sizes a Pool.
type PoolConfig struct {
	Name string
	// Pairs is the number of shares: interfaces using the pool may have at most this many receive
	// and transmit queues.
	Pairs int
	// Buffers per share. Each interface's queue pair k can hold a full receive ring and a full
	// transmit ring of share k's buffers, and the application holds some: for two interfaces with
	// rings of R slots, 5R leaves R to the application.
	Buffers    int
	BufferSize int
	// Memory backs the pool: BackingAuto and BackingMemfd give a memfd of ordinary pages, sealed
	// against shrinking and growing and faulted in by this process, which pays for it.
	// BackingHugepages is refused: the application touches pool buffers itself, where no fault
	// is trapped, and a peer can punch a hole into hugetlbfs memory (only F_SEAL_WRITE would stop
	// that, and it rules out the peer's writable mapping) that is refilled on the next touch only
	// while a free huge page is left: else SIGBUS in the application. In ordinary memory a
	// punched hole reads as zeros.
	Memory alloc.Backing
	// NewRegion, when set, creates the pool's region instead; it must be one that cannot fault
	// (alloc.Region.MayFault false: a sealed memfd of ordinary memory), or NewPool refuses it.
	NewRegion func(name string, size int) (*alloc.Region, error)
	// PeersTrustEachOther lets several interfaces use the pool (zero-copy forwarding between
	// them). Every one of their peers maps the whole pool and can read and rewrite the frames
	// of all the others, received and sent, at any time: set it only when all those peers are
	// the same party (two links to one data plane, or to pods of one tenant), never for peers
	// that are separate tenants. Without it Open refuses a second interface (ErrPoolShared).
	PeersTrustEachOther bool
}

// ErrPoolShared is why Open refuses an interface whose Config.Pool another interface used
// already, unless the pool was created with PoolConfig.PeersTrustEachOther.
var ErrPoolShared = errors.New("the pool's memory is mapped whole by every peer it is announced to, " +
	"so this interface's peer would read and rewrite the other interface's frames: give each interface " +
	"its own pool (Forward copies once between them), or set PoolConfig.PeersTrustEachOther if, and only if, " +
	"the peers trust each other")

// errPoolMayFault is why NewPool refuses memory a peer could make fault under the application.
var errPoolMayFault = errors.New("the region can fault when the peer truncates it or punches a hole into it " +
	"(a file, such as a hugepage pool unit, or hugetlbfs memory): zero-copy buffers are touched by the " +
	"application, where a fault kills the process; use a sealed memfd of ordinary memory (alloc.BackingMemfd)")

// NewPool creates a pool. Close it after every interface using it is closed.
func NewPool(c PoolConfig) (*Pool, error) {
	if c.Pairs < 1 || c.Pairs > MaxQueues || c.Buffers < 1 || c.BufferSize < MinBufferSize || c.BufferSize > MaxBufferSize {
		return nil, fmt.Errorf("memif pool %q: pairs %d (1..%d), buffers %d (>= 1) and buffer size %d (%d..%d) out of range",
			c.Name, c.Pairs, MaxQueues, c.Buffers, c.BufferSize, MinBufferSize, MaxBufferSize)
	}
	size := uint64(c.Pairs) * uint64(c.Buffers) * uint64(c.BufferSize)
	if size > 1<<32-1 {
		return nil, fmt.Errorf("memif pool %q: %d bytes is over the 4 GiB a region can address", c.Name, size)
	}
	var region *alloc.Region
	var err error
	switch {
	case c.NewRegion != nil:
		region, err = c.NewRegion("memif-pool-"+c.Name, int(size))
	case c.Memory == alloc.BackingHugepages:
		return nil, fmt.Errorf("memif pool %q: hugepages: %w", c.Name, errPoolMayFault)
	default:
		region, err = alloc.NewRegion("memif-pool-"+c.Name, int(size), alloc.BackingMemfd)
	}
	if err != nil {
		return nil, fmt.Errorf("memif pool %q: %w", c.Name, err)
	}
	if region.MayFault {
		region.Close()
		return nil, fmt.Errorf("memif pool %q: %w", c.Name, errPoolMayFault)
	}
	p := &Pool{region: region, bufSize: c.BufferSize, shares: make([]*zcShare, c.Pairs), name: c.Name, trusted: c.PeersTrustEachOther}
	for k := range p.shares {
		p.shares[k] = &zcShare{
			mem:     region.Mem,
			bufSize: uint32(c.BufferSize),
			free:    alloc.NewPool(c.Buffers, uint32(k*c.Buffers*c.BufferSize), uint32(c.BufferSize)),
		}
	}
	return p, nil
}

// privatePool is the pool Open creates for one zero-copy interface: per queue pair, room for a
// full receive ring, a full transmit ring and as much again for the application to hold.
func privatePool(cfg Config) (*Pool, error) {
	p, err := NewPool(PoolConfig{Name: cfg.Name, Pairs: max(cfg.RxQueues, cfg.TxQueues), Buffers: 3 * cfg.RingSize,
		BufferSize: cfg.BufferSize, Memory: cfg.Memory, NewRegion: cfg.NewRegion})
	if err != nil {
		return nil, fmt.Errorf("memif: zero-copy pool: %w", err)
	}
	p.private = true
	return p, nil
}

// BuffersFree is how many buffers of share k are free. Call it from share k's goroutine.
func (p *Pool) BuffersFree(k int) int { return p.shares[k].available() }

// available is how many buffers of the share are free.
func (p *zcShare) available() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free.Available()
}

// join registers interface name as a user. An untrusted pool takes one interface in its life:
// a peer that was given the pool keeps its mapping after the interface closed.
func (p *Pool) join(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("pool %q is closed", p.name)
	}
	if p.joined && !p.trusted {
		return fmt.Errorf("pool %q was given to interface %q: %w", p.name, p.first, ErrPoolShared)
	}
	if !p.joined {
		p.joined, p.first = true, name
	}
	p.users++
	return nil
}

// leave unregisters a user; a private pool is closed with its interface.
func (p *Pool) leave() error {
	p.mu.Lock()
	p.users--
	last := p.users == 0 && p.private
	p.mu.Unlock()
	if last {
		return p.Close()
	}
	return nil
}

// Close unmaps the pool. It fails while an interface using it is open: their rings point into it.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.users > 0 {
		return fmt.Errorf("memif: pool in use by %d open interfaces", p.users)
	}
	if p.closed {
		return nil
	}
	p.closed = true
	return p.region.Close()
}
