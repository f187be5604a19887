package memif

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"path/filepath"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// OpenPort opens the interface a port spec describes (see portspec.Discover) with the Config
// PortConfig builds. Use PortConfig and Open instead to change settings port.json does not carry.
// A port read from a port.json (s.File set) reports its link state and counters to the node in
// the slot's status.json (package portstatus) every 5 s, at each link change and at Close.
func OpenPort(s portspec.PortSpec) (*Interface, error) {
	cfg, err := PortConfig(s)
	if err != nil {
		return nil, err
	}
	if cfg.ZeroCopy && len(portspec.PoolFiles()) > 0 {
		slog.Default().Info("memif: zero-copy pool on a sealed memfd of this pod's memory, not on a hugepage pool unit",
			"memif", s.Name, "reason", "a pool unit is a file, which cannot be sealed: the peer could truncate it under the application")
	}
	ifc, err := Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("memif port %q (%s): %w", s.Name, s.File, err)
	}
	return ifc, nil
}

// PortConfig converts a port spec to a Config for Open: role, socket, id, secret, mode, name and
// sizes. When the pod was granted hugepage pool units ($MEMIFNET_POOLS, portspec.PoolFiles) and
// this side is a copy-mode client (the side that creates the shared memory), NewRegion maps the
// region from a pool unit, so a pod whose pool is there gets its pre-faulted hugepages or a clear
// error rather than a silent fallback to small pages; set NewRegion to nil to use Memory instead.
// A zero-copy client never shares a pool unit: the application reads its buffers directly, and
// a unit is a file the server could truncate under it (SIGBUS), so its pool is a sealed memfd
// (Open) and its rings a small memfd. A server's MaxRegionBytes admits at least what a client
// with the spec's own sizes announces.
// Fields the spec does not carry (logger, timeouts, cache line, application name) keep their
// defaults.
func PortConfig(s portspec.PortSpec) (Config, error) {
	if err := s.Validate(); err != nil {
		return Config{}, fmt.Errorf("memif port %q: %w", s.Name, err)
	}
	role := RoleClient
	if s.Role == portspec.RoleServer {
		role = RoleServer
	}
	mode, _ := parseMode(s.Mode)
	cfg := Config{
		Role:       role,
		Socket:     s.Socket,
		ID:         s.ID,
		Secret:     s.Secret,
		Mode:       mode,
		Name:       s.Name,
		RxQueues:   s.Queues,
		TxQueues:   s.Queues,
		RingSize:   s.RingSize,
		BufferSize: s.BufferSize,
		// Zero-copy is the client's (the side that owns the buffers, as in DPDK and VPP); a
		// server with zeroCopy in its port.json copies.
		ZeroCopy: s.ZeroCopy && role == RoleClient,
	}
	if s.File != "" {
		cfg.StatusDir = filepath.Dir(s.File)
	}
	if role == RoleServer {
		cfg.MaxRegionBytes = max(DefaultMaxRegionBytes, clientRegionBytes(s.Queues, s.RingSize, s.BufferSize))
	}
	if pools := portspec.PoolFiles(); cfg.Role == RoleClient && !cfg.ZeroCopy && len(pools) > 0 {
		cfg.NewRegion = poolRegion(pools)
	}
	return cfg, nil
}

// clientRegionBytes is the most a memifnet client with these sizes announces: its rings (laid out
// for 128-byte cache lines, the larger) and either one buffer per ring slot (copy mode) or a
// zero-copy pool of three ring's worth of buffers per queue pair (privatePool), the larger.
func clientRegionBytes(queues, ringSize, bufSize int) uint64 {
	rings := uint64(2*queues) * uint64(ring.Size(uint8(bits.TrailingZeros(uint(ringSize))), 128))
	return rings + uint64(3*queues)*uint64(ringSize)*uint64(bufSize)
}

// parseMode converts a mode name of port.json to a Mode.
func parseMode(s string) (Mode, error) {
	switch s {
	case portspec.ModeEthernet:
		return ModeEthernet, nil
	case portspec.ModeIP:
		return ModeIP, nil
	case portspec.ModePuntInject:
		return ModePuntInject, nil
	}
	return 0, portspec.CheckMode(s)
}

// poolRegion maps the client's region from the first pool unit that no other interface of the
// pod holds (OpenFileRegion locks a unit while it is mapped).
func poolRegion(units []string) func(string, int) (*alloc.Region, error) {
	return func(_ string, size int) (*alloc.Region, error) {
		for _, u := range units {
			r, err := alloc.OpenFileRegion(u, size)
			if errors.Is(err, alloc.ErrFileInUse) {
				continue
			}
			return r, err
		}
		return nil, fmt.Errorf("all %d hugepage pool units (%s) are in use by other interfaces", len(units), portspec.EnvPools)
	}
}
