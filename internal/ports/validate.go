package ports

import (
	"fmt"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// FieldError is one problem of a port request: the JSON field at fault and what is wrong. It
// names neither the port nor where the request came from: the caller adds that (the annotation's
// "port 1 (east)", the claim's "request east").
type FieldError struct {
	Field string // JSON name of the field, as the annotation and a PortConfig spell it
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Msg) }

func fieldErr(field, format string, a ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// Default fills in the defaults of the settings s leaves unset (docs/design.md, "Port object").
func (s *Settings) Default() {
	if s.Mode == "" {
		s.Mode = DefaultMode
	}
	if s.Queues == 0 {
		s.Queues = DefaultQueues
	}
	if s.RingSize == 0 {
		s.RingSize = DefaultRingSize
	}
	if s.BufferSize == 0 {
		s.BufferSize = DefaultBufferSize
	}
}

// Validate checks one port request, defaults filled in (Default), and returns every problem,
// none when it is valid. It is the one validator of a port request: the annotation's parser and
// the DRA driver's PortConfig both use it.
func (p Port) Validate() []*FieldError {
	var fes []*FieldError
	bad := func(field, format string, a ...any) { fes = append(fes, fieldErr(field, format, a...)) }
	if err := portspec.CheckName(p.Name); err != nil {
		bad("name", "%v", err)
	}
	field, err := portspec.CheckEnd(p.Link, p.Peer)
	switch {
	case err != nil:
		bad(field, "%v", err)
	case names.HasPlaceholder(p.Link):
		bad("link", "%q: %s is resolved from the pod's label %s by memif-webhook at admission; the annotation reached here unresolved", p.Link, names.OrdinalPlaceholder, names.PodIndexLabel)
	case p.Link != "" && (len(p.Link) > names.MaxLinkNameLen || !names.IsDNSLabel(p.Link)):
		bad("link", "%q must be 1-%d characters of [a-z0-9-], starting and ending alphanumeric", p.Link, names.MaxLinkNameLen)
	}
	switch {
	case p.Role != "" && portspec.CheckRole(p.Role) != nil:
		bad("role", "%q must be server or client", p.Role)
	case p.Peer == portspec.PeerHost && p.Role != "" && p.Role != portspec.HostPodRole:
		bad("role", "%q on a host port: the node's data plane is always the server of a host port and the pod the client "+
			"(a node side chosen by the pod would connect to a path the pod controls, or hand the node's buffer memory to the pod "+
			"as a zero-copy client); remove \"role\" or set it to %q", p.Role, portspec.HostPodRole)
	}
	if err := portspec.CheckMode(p.Mode); err != nil {
		bad("mode", "%v", err)
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"queues", p.Queues}, {"ringSize", p.RingSize}, {"bufferSize", p.BufferSize}} {
		if err := portspec.CheckSize(f.name, f.n); err != nil {
			bad(f.name, "%v", err)
		}
	}
	return fes
}
