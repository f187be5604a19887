// Package portspec is the in-pod contract between memif-cni and the application: the port.json
// file memif-cni writes into each socket slot it wires, the directory and environment variables
// that locate those files, and the rules a valid spec follows.
//
// It is a leaf package (the standard library and the module's dependency-free names), so that the CNI plugin and other node agents can
// write and check port.json without linking the memif data path. An application reads its ports
// with Discover and opens one with memif.OpenPort.
package portspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
)

// Version is the port.json format this package writes and reads. A file with another major
// version is refused rather than half-understood.
const Version = "1"

// Roles of a port, spelled as in port.json and the memifnet.io/ports annotation. The client
// connects and creates the shared memory; the server listens.
const (
	RoleServer = "server"
	RoleClient = "client"
)

// Modes of a port (memif protocol 2.0), spelled as in port.json and the annotation.
const (
	ModeEthernet   = "ethernet"
	ModeIP         = "ip"
	ModePuntInject = "punt-inject"
)

// PeerHost is the peer of a port served by a host data plane rather than another pod.
const PeerHost = "host"

// Limits of a port spec (see internal/names for why each is what it is). The buffer size bound
// is the one every memif implementation takes, narrower than what pkg/memif accepts.
const (
	MaxNameLen    = names.MaxPortNameLen
	MaxQueues     = names.MaxQueues
	MinRingSize   = names.MinRingSize
	MaxRingSize   = names.MaxRingSize
	MinBufferSize = names.MinBufferSize
	MaxBufferSize = names.MaxBufferSize
	// MaxSecretLen is the longest secret: the protocol's 24-byte field ends with a NUL.
	MaxSecretLen = 23
	// MaxSocketLen is the longest socket path: a Unix socket address holds 107 bytes and a NUL.
	MaxSocketLen = 107
)

// PortSpec is the in-pod contract written by memif-cni to <slot>/port.json: one memif port the
// pod asked for in its memifnet.io/ports annotation, resolved to a socket, a role and sizes.
// Exactly one of Link and Peer is set.
type PortSpec struct {
	Version    string   `json:"version"`
	Name       string   `json:"name"`             // the port name from the annotation
	Role       string   `json:"role"`             // RoleServer or RoleClient, this pod's side
	Mode       string   `json:"mode"`             // ModeEthernet, ModeIP or ModePuntInject
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

// IsPortName reports whether name is a valid port name: a DNS label (names.IsDNSLabel) of at
// most 15 characters, so that it can name a Linux interface and a directory.
func IsPortName(name string) bool {
	return len(name) <= MaxNameLen && names.IsDNSLabel(name)
}

// CheckRole says why s is not a role name, or returns nil.
func CheckRole(s string) error {
	if s == RoleServer || s == RoleClient {
		return nil
	}
	return fmt.Errorf("%q must be %s or %s", s, RoleServer, RoleClient)
}

// CheckName says why name is not a port name (IsPortName), or returns nil.
func CheckName(name string) error {
	if IsPortName(name) {
		return nil
	}
	return fmt.Errorf("%q must be 1-%d characters of [a-z0-9-], starting and ending alphanumeric", name, MaxNameLen)
}

// CheckSize says why n is not a valid value of the size field (queues, ringSize or
// bufferSize), or returns nil: the one statement of the limits for port.json and a port request.
func CheckSize(field string, n int) error {
	switch field {
	case "queues":
		if n < 1 || n > MaxQueues {
			return fmt.Errorf("%d must be 1..%d", n, MaxQueues)
		}
	case "ringSize":
		if n < MinRingSize || n > MaxRingSize || n&(n-1) != 0 {
			return fmt.Errorf("%d must be a power of two from %d to %d", n, MinRingSize, MaxRingSize)
		}
	case "bufferSize":
		if n < MinBufferSize || n > MaxBufferSize {
			return fmt.Errorf("%d must be %d..%d", n, MinBufferSize, MaxBufferSize)
		}
	default:
		return fmt.Errorf("%s is not a size field", field)
	}
	return nil
}

// CheckEnd says what is wrong with a port's other end, link or peer (exactly one is set, and a
// peer is PeerHost), and which of the two fields is at fault; nil when nothing is. The one
// statement of the rule for port.json and a port request.
func CheckEnd(link, peer string) (field string, err error) {
	switch {
	case link != "" && peer != "":
		return "link", errors.New("set together with peer; a port has one or the other")
	case link == "" && peer == "":
		return "link", fmt.Errorf(`missing: set "link" (a pod-to-pod link) or "peer": %q`, PeerHost)
	case peer != "" && peer != PeerHost:
		return "peer", fmt.Errorf("%q must be %q", peer, PeerHost)
	}
	return "", nil
}

// CheckMode says why s is not a mode name, or returns nil.
func CheckMode(s string) error {
	switch s {
	case ModeEthernet, ModeIP, ModePuntInject:
		return nil
	}
	return fmt.Errorf("%q must be %s, %s or %s", s, ModeEthernet, ModeIP, ModePuntInject)
}

// Validate checks every field and reports all problems at once, each naming its JSON field.
func (s PortSpec) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("field %q: %s", field, fmt.Sprintf(format, a...)))
	}
	if major, _, _ := strings.Cut(s.Version, "."); major != Version {
		bad("version", "%q is not supported (this library reads version %s)", s.Version, Version)
	}
	if err := CheckName(s.Name); err != nil {
		bad("name", "%v", err)
	}
	if err := CheckRole(s.Role); err != nil {
		bad("role", "%v", err)
	}
	if err := CheckMode(s.Mode); err != nil {
		bad("mode", "%v", err)
	}
	if s.Socket == "" {
		bad("socket", "missing")
	} else if len(s.Socket) > MaxSocketLen {
		bad("socket", "%q is longer than the %d bytes a Unix socket address holds", s.Socket, MaxSocketLen)
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"queues", s.Queues}, {"ringSize", s.RingSize}, {"bufferSize", s.BufferSize}} {
		if err := CheckSize(f.name, f.n); err != nil {
			bad(f.name, "%v", err)
		}
	}
	if len(s.Secret) > MaxSecretLen {
		bad("secret", "%d bytes, at most %d", len(s.Secret), MaxSecretLen)
	}
	if field, err := CheckEnd(s.Link, s.Peer); err != nil {
		bad(field, "%v", err)
	}
	return errors.Join(errs...)
}

// Parse decodes one port.json strictly: unknown fields, trailing data and bad values are errors
// that name the field.
func Parse(data []byte) (PortSpec, error) {
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

// Read reads and validates one port.json file.
func Read(file string) (PortSpec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return PortSpec{}, fmt.Errorf("memif port spec: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return PortSpec{}, fmt.Errorf("memif port spec %s: %w", file, err)
	}
	s.File = file
	return s, nil
}
