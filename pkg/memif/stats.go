package memif

import (
	"errors"

	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// InterfaceStats is a snapshot of an interface's link state and counters, for metrics and the
// port status file. Rx and Tx hold every queue's Stats, down or up; the link counters survive
// reconnects as the queues' do.
type InterfaceStats struct {
	Name      string
	Up        bool
	LinkUps   uint64 // connections established since Open
	LinkDowns uint64 // connections lost since Open
	// LastDownReason is why the link last went down, one of portstatus.Reasons (a small fixed
	// set: good for a metric label), or portstatus.ReasonNone; LastDownError is the error itself.
	LastDownReason string
	LastDownError  error
	Rx, Tx         []Stats
}

// Stats takes a snapshot of the link state and of every queue's counters. It may be called from
// any goroutine; each queue is read under its guard for a few nanoseconds (see queue Stats).
func (i *Interface) Stats() InterfaceStats {
	i.mu.Lock()
	s := InterfaceStats{
		Name: i.cfg.Name, Up: i.conn != nil, LinkUps: i.linkUps, LinkDowns: i.linkDowns,
		LastDownReason: i.downReason, LastDownError: i.downErr,
	}
	i.mu.Unlock()
	s.Rx = make([]Stats, len(i.rx))
	for k, q := range i.rx {
		s.Rx[k] = q.Stats()
	}
	s.Tx = make([]Stats, len(i.tx))
	for k, q := range i.tx {
		s.Tx[k] = q.Stats()
	}
	return s
}

// Sum adds the counters of several queues up.
func Sum(queues []Stats) Stats {
	var t Stats
	for _, s := range queues {
		t.Packets += s.Packets
		t.Bytes += s.Bytes
		t.Drops += s.Drops
		t.BadDescs += s.BadDescs
		t.NoBuf += s.NoBuf
	}
	return t
}

// recordDown counts a lost connection and files its reason. Call with mu held.
func (i *Interface) recordDown(reason error) {
	i.linkDowns++
	i.downErr = reason
	i.downReason = downReason(reason, i.closed)
}

// downReason sorts why a connection ended into one of portstatus.Reasons.
func downReason(err error, closed bool) string {
	var pe *PeerError
	var proto *protocolError
	var fault *FaultError
	var efd *EventfdError
	switch {
	case closed || errors.Is(err, ErrClosed):
		return portstatus.ReasonClosed
	case errors.As(err, &pe):
		return portstatus.ReasonPeer
	case errors.As(err, &proto):
		return portstatus.ReasonProtocol
	case errors.As(err, &fault):
		return portstatus.ReasonFault
	case errors.As(err, &efd):
		return portstatus.ReasonEventfd
	case err != nil:
		return portstatus.ReasonSocket // the control channel failed or closed: the peer went away
	}
	return portstatus.ReasonOther
}
