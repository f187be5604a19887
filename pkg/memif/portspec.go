package memif

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/memifnet/memifnet/pkg/alloc"
)

// PortSpecVersion is the port.json format this library writes and reads. A file with another
// major version is refused rather than half-understood.
const PortSpecVersion = "1"

// DefaultPortDir is where the device plugin mounts the pod's socket slots and where the CNI
// plugin writes one port.json per slot.
const DefaultPortDir = "/run/memifnet"

// Environment variables read by Discover and OpenPort.
const (
	// EnvPortDir overrides DefaultPortDir (tests, or a pod that mounts the slots elsewhere).
	EnvPortDir = "MEMIFNET_DIR"
	// EnvPools lists the hugepage pool unit files the device plugin granted, comma-separated.
	EnvPools = "MEMIFNET_POOLS"
)

// PeerHost is the peer of a port served by a host data plane rather than another pod.
const PeerHost = "host"

// PortSpec is the in-pod contract written by memif-cni to /run/memifnet/<slot>/port.json: one
// memif port the pod asked for in its memifnet.io/ports annotation, resolved to a socket, a role
// and sizes. Exactly one of Link and Peer is set.
type PortSpec struct {
	Version    string   `json:"version"`
	Name       string   `json:"name"`             // the port name from the annotation
	Role       string   `json:"role"`             // "server" or "client", this pod's side
	Mode       string   `json:"mode"`             // "ethernet", "ip" or "punt-inject"
	ID         uint32   `json:"id"`               // memif interface id on the socket
	Socket     string   `json:"socket"`           // socket path as the container sees it
	Secret     string   `json:"secret,omitempty"` // shared with the peer only
	Queues     int      `json:"queues"`           // queue pairs
	RingSize   int      `json:"ringSize"`         // ring entries, a power of two
	BufferSize int      `json:"bufferSize"`       // bytes per buffer
	ZeroCopy   bool     `json:"zeroCopy,omitempty"`
	MAC        string   `json:"mac,omitempty"` // stable locally administered MAC (ethernet mode)
	IPs        []string `json:"ips,omitempty"` // CIDRs from IPAM (ip mode)
	Link       string   `json:"link,omitempty"`
	Peer       string   `json:"peer,omitempty"`

	// File is the port.json the spec was read from; empty for a spec built in code.
	File string `json:"-"`
}

// IsPortName reports whether name is a valid port name: 1-15 characters of [a-z0-9-], starting
// and ending alphanumeric (so that it can name a Linux interface and a directory). A hand-written
// check rather than a regexp: compiling one at init costs every memif-cni run about 0.5 ms.
func IsPortName(name string) bool {
	if len(name) == 0 || len(name) > 15 || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Validate checks every field and reports all problems at once, each naming its JSON field.
func (s PortSpec) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("field %q: %s", field, fmt.Sprintf(format, a...)))
	}
	if major, _, _ := strings.Cut(s.Version, "."); major != PortSpecVersion {
		bad("version", "%q is not supported (this library reads version %s)", s.Version, PortSpecVersion)
	}
	if !IsPortName(s.Name) {
		bad("name", "%q must be 1-15 characters of [a-z0-9-], starting and ending alphanumeric", s.Name)
	}
	if _, err := parseRole(s.Role); err != nil {
		bad("role", "%v", err)
	}
	if _, err := ParseMode(s.Mode); err != nil {
		bad("mode", "%v", err)
	}
	if s.Socket == "" {
		bad("socket", "missing")
	} else if len(s.Socket) > 107 {
		bad("socket", "%q is longer than the 107 bytes a Unix socket address holds", s.Socket)
	}
	if s.Queues < 1 || s.Queues > MaxQueues {
		bad("queues", "%d must be 1..%d", s.Queues, MaxQueues)
	}
	if s.RingSize < 2 || s.RingSize > 32768 || s.RingSize&(s.RingSize-1) != 0 {
		bad("ringSize", "%d must be a power of two from 2 to 32768", s.RingSize)
	}
	if s.BufferSize < 64 || s.BufferSize > MaxBufferSize {
		bad("bufferSize", "%d must be 64..%d", s.BufferSize, MaxBufferSize)
	}
	if len(s.Secret) > 23 {
		bad("secret", "%d bytes, at most 23", len(s.Secret))
	}
	switch {
	case s.Link != "" && s.Peer != "":
		bad("link", "set together with peer %q; a port has one or the other", s.Peer)
	case s.Link == "" && s.Peer == "":
		bad("link", "neither link nor peer is set")
	case s.Peer != "" && s.Peer != PeerHost:
		bad("peer", "%q must be %q", s.Peer, PeerHost)
	}
	return errors.Join(errs...)
}

func parseRole(s string) (Role, error) {
	switch s {
	case "server":
		return RoleServer, nil
	case "client":
		return RoleClient, nil
	}
	return 0, fmt.Errorf("%q must be server or client", s)
}

// ParseMode converts a mode name of the annotation and port.json to a Mode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "ethernet":
		return ModeEthernet, nil
	case "ip":
		return ModeIP, nil
	case "punt-inject":
		return ModePuntInject, nil
	}
	return 0, fmt.Errorf("%q must be ethernet, ip or punt-inject", s)
}

// ParsePortSpec decodes one port.json strictly: unknown fields, trailing data and bad values are
// errors that name the field.
func ParsePortSpec(data []byte) (PortSpec, error) {
	var s PortSpec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return PortSpec{}, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return PortSpec{}, errors.New("decode: trailing data after the JSON object")
	}
	if err := s.Validate(); err != nil {
		return PortSpec{}, err
	}
	return s, nil
}

// ReadPortSpec reads and validates one port.json file.
func ReadPortSpec(file string) (PortSpec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return PortSpec{}, fmt.Errorf("memif port spec: %w", err)
	}
	s, err := ParsePortSpec(data)
	if err != nil {
		return PortSpec{}, fmt.Errorf("memif port spec %s: %w", file, err)
	}
	s.File = file
	return s, nil
}

// Discover returns the ports memif-cni wired for this pod, read from $MEMIFNET_DIR or
// /run/memifnet. See DiscoverDir.
func Discover() ([]PortSpec, error) {
	dir := os.Getenv(EnvPortDir)
	if dir == "" {
		dir = DefaultPortDir
	}
	return DiscoverDir(dir)
}

// DiscoverDir reads every <dir>/*/port.json, sorted by port name. A slot without port.json is
// skipped (the pod holds more slots than it asked ports for, or the directory is a pool
// directory); a port.json that does not parse is an error naming the file, since silently
// dropping a port would leave the app half-wired. A missing dir gives no ports and no error, so
// an app can run outside Kubernetes too.
func DiscoverDir(dir string) ([]PortSpec, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "port.json"))
	if err != nil {
		return nil, fmt.Errorf("memif discover %s: %w", dir, err)
	}
	var specs []PortSpec
	var errs []error
	seen := map[string]string{}
	for _, f := range files {
		s, err := ReadPortSpec(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a concurrent DEL
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, ok := seen[s.Name]; ok {
			errs = append(errs, fmt.Errorf("memif port spec %s: field \"name\": %q is also used by %s", f, s.Name, prev))
			continue
		}
		seen[s.Name] = f
		specs = append(specs, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(specs, func(a, b int) bool { return specs[a].Name < specs[b].Name })
	return specs, nil
}

// Lookup returns the spec named name.
func Lookup(specs []PortSpec, name string) (PortSpec, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s, true
		}
	}
	return PortSpec{}, false
}

// Config converts the spec to a Config for Open: role, socket, id, secret, mode, name and sizes.
// Fields the spec does not carry (logger, memory backing, timeouts) keep their defaults.
func (s PortSpec) Config() (Config, error) {
	if err := s.Validate(); err != nil {
		return Config{}, fmt.Errorf("memif port %q: %w", s.Name, err)
	}
	role, _ := parseRole(s.Role)
	mode, _ := ParseMode(s.Mode)
	return Config{
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
	}, nil
}

// PortOption adjusts the Config OpenPort builds.
type PortOption func(*portOptions)

type portOptions struct {
	logger *slog.Logger
	pools  *string
	edit   []func(*Config)
}

// WithLogger sets the interface's logger.
func WithLogger(l *slog.Logger) PortOption { return func(o *portOptions) { o.logger = l } }

// WithPools overrides $MEMIFNET_POOLS (a comma-separated list of pool unit files); "" disables
// the pool.
func WithPools(list string) PortOption { return func(o *portOptions) { o.pools = &list } }

// WithConfig edits the Config after it was built from the spec, for settings port.json does not
// carry (timeouts, cache line, application name).
func WithConfig(f func(*Config)) PortOption {
	return func(o *portOptions) { o.edit = append(o.edit, f) }
}

// PoolFiles lists the hugepage pool unit files named by $MEMIFNET_POOLS that exist.
func PoolFiles() []string { return splitPools(os.Getenv(EnvPools)) }

func splitPools(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// OpenPort opens the interface a port spec describes. When the pod was granted hugepage pool
// units ($MEMIFNET_POOLS) and this side is the client (the side that creates the shared memory),
// its region is mapped from a pool unit, so a pod whose pool is there gets its pre-faulted
// hugepages or a clear error rather than a silent fallback to small pages.
func OpenPort(s PortSpec, opts ...PortOption) (*Interface, error) {
	var o portOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := s.Config()
	if err != nil {
		return nil, err
	}
	if o.logger != nil {
		cfg.Logger = o.logger
	}
	pools := PoolFiles()
	if o.pools != nil {
		pools = splitPools(*o.pools)
	}
	if cfg.Role == RoleClient && len(pools) > 0 {
		cfg.NewRegion = poolRegion(pools)
	}
	for _, f := range o.edit {
		f(&cfg)
	}
	ifc, err := Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("memif port %q (%s): %w", s.Name, s.File, err)
	}
	return ifc, nil
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
		return nil, fmt.Errorf("all %d hugepage pool units (%s) are in use by other interfaces", len(units), EnvPools)
	}
}
