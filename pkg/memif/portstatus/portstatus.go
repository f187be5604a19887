// Package portstatus is the format of a port's status file, <slot>/status.json: the link state
// and counters a memif application reports for the port it opened from port.json, for the node
// agent to export. pkg/memif writes it for every port opened with OpenPort; a DPDK or VPP
// application can write it too (docs/memif.md shows how).
//
// It is a leaf package (the standard library and internal/names), so that a node agent can read
// status files without linking the memif data path. The writer is a pod, so Parse treats a file
// as hostile input: bounded size, strict decode, every field checked.
package portstatus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memifnet/memifnet/internal/names"
)

// Version is the format this package writes and reads; a file with another major version is
// refused.
const Version = "1"

// File is the status file's name in the slot.
const File = names.StatusFile

// MaxSize is the largest status file Parse accepts: a valid one is well under 1 KiB.
const MaxSize = 4 << 10

// MaxMessageLen is the longest LastDownMessage, in bytes.
const MaxMessageLen = 256

// DefaultInterval is how often pkg/memif rewrites the file.
const DefaultInterval = 5 * time.Second

// States of a port.
const (
	StateUp   = "up"   // connected to the peer
	StateDown = "down" // open, not connected (waiting for or reconnecting to the peer)
	// StateClosed: the application closed the port; the file is its last word.
	StateClosed = "closed"
)

// Reasons a link went down: a small fixed set, so that a metric label made of one stays bounded.
const (
	ReasonNone     = ""         // the link never went down
	ReasonPeer     = "peer"     // the peer sent a DISCONNECT
	ReasonProtocol = "protocol" // this side refused the peer (a bad message): it sent a DISCONNECT
	ReasonSocket   = "socket"   // the control channel closed or failed (the peer went away)
	ReasonFault    = "fault"    // the peer's shared memory faulted (truncated or holed)
	ReasonEventfd  = "eventfd"  // the peer's interrupt eventfd misbehaved
	ReasonClosed   = "closed"   // this side closed the port
	ReasonOther    = "other"    // anything else
)

// Reasons lists every reason but ReasonNone.
var Reasons = []string{ReasonPeer, ReasonProtocol, ReasonSocket, ReasonFault, ReasonEventfd, ReasonClosed, ReasonOther}

// Status is one port's status file.
type Status struct {
	Version string `json:"version"`
	Port    string `json:"port"`  // the port name, as in port.json
	State   string `json:"state"` // StateUp, StateDown or StateClosed
	// Time is when the writer took the snapshot (RFC 3339); IntervalSeconds is how often it
	// rewrites the file, so that a reader can tell a stale one (the writer died).
	Time            time.Time `json:"time"`
	IntervalSeconds int       `json:"intervalSeconds"`
	// LinkUps and LinkDowns count the link's transitions since the port was opened.
	LinkUps   uint64 `json:"linkUps"`
	LinkDowns uint64 `json:"linkDowns"`
	// LastDownReason is why the link last went down (one of Reasons; empty if it never did),
	// LastDownMessage the error in words, for people, at most MaxMessageLen bytes.
	LastDownReason  string   `json:"lastDownReason,omitempty"`
	LastDownMessage string   `json:"lastDownMessage,omitempty"`
	Rx              Counters `json:"rx"` // summed over the port's receive queues
	Tx              Counters `json:"tx"` // summed over its transmit queues
}

// Counters of one direction of a port, since it was opened.
type Counters struct {
	Packets        uint64 `json:"packets"`
	Bytes          uint64 `json:"bytes"`
	Drops          uint64 `json:"drops"`          // packets lost
	BadDescriptors uint64 `json:"badDescriptors"` // descriptors from the peer that failed validation
	// RingFull: Tx bursts cut short by a full ring (or an empty zero-copy pool); Rx: ring
	// refills short of buffers (zero-copy).
	RingFull uint64 `json:"ringFull"`
}

// Validate checks every field and reports all problems at once, each naming its JSON field.
func (s Status) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("field %q: %s", field, fmt.Sprintf(format, a...)))
	}
	if major, _, _ := strings.Cut(s.Version, "."); major != Version {
		bad("version", "%q is not supported (this reader takes version %s)", s.Version, Version)
	}
	if !validPortName(s.Port) {
		bad("port", "%q must be 1-%d characters of [a-z0-9-], starting and ending alphanumeric", s.Port, names.MaxPortNameLen)
	}
	switch s.State {
	case StateUp, StateDown, StateClosed:
	default:
		bad("state", "%q must be %s, %s or %s", s.State, StateUp, StateDown, StateClosed)
	}
	if s.Time.IsZero() {
		bad("time", "missing")
	}
	if s.IntervalSeconds < 1 || s.IntervalSeconds > 3600 {
		bad("intervalSeconds", "%d must be 1..3600", s.IntervalSeconds)
	}
	if s.LastDownReason != ReasonNone && !isReason(s.LastDownReason) {
		bad("lastDownReason", "%q must be one of %s", s.LastDownReason, strings.Join(Reasons, ", "))
	}
	if s.LastDownReason == ReasonNone && s.LastDownMessage != "" {
		bad("lastDownMessage", "set without lastDownReason")
	}
	if len(s.LastDownMessage) > MaxMessageLen || !printable(s.LastDownMessage) {
		bad("lastDownMessage", "must be at most %d bytes of printable UTF-8", MaxMessageLen)
	}
	return errors.Join(errs...)
}

// Parse decodes one status file strictly: more than MaxSize bytes, unknown
// fields, trailing data and bad values are errors that name the field.
func Parse(data []byte) (Status, error) {
	if len(data) > MaxSize {
		return Status{}, fmt.Errorf("status file: %d bytes, at most %d", len(data), MaxSize)
	}
	var s Status
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Status{}, fmt.Errorf("status file: decode: %w", err)
	}
	if dec.More() {
		return Status{}, errors.New("status file: decode: trailing data after the JSON object")
	}
	if err := s.Validate(); err != nil {
		return Status{}, fmt.Errorf("status file: %w", err)
	}
	return s, nil
}

// Marshal encodes s, after checking it, as the writer puts it in the file.
func Marshal(s Status) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("status file: %w", err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("status file: %w", err)
	}
	return append(data, '\n'), nil
}

// TruncateMessage cuts msg to at most MaxMessageLen bytes of printable UTF-8, for
// LastDownMessage: control characters become spaces, a cut never splits a character.
func TruncateMessage(msg string) string {
	var b strings.Builder
	for _, r := range msg {
		if r == utf8.RuneError || !isPrint(r) {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > MaxMessageLen {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isReason(s string) bool {
	for _, r := range Reasons {
		if s == r {
			return true
		}
	}
	return false
}

func isPrint(r rune) bool { return r >= ' ' && r != 0x7f && !(r >= 0x80 && r < 0xa0) }

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !isPrint(r) {
			return false
		}
	}
	return true
}

// validPortName is portspec.IsPortName, repeated so that this package stays a leaf of its own.
func validPortName(name string) bool {
	if len(name) == 0 || len(name) > names.MaxPortNameLen || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
