package memif

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by calls on a closed interface.
var ErrClosed = errors.New("memif: interface closed")

// PeerError reports that the peer ended or refused the connection with a DISCONNECT message, for
// example because of a wrong secret or an unknown interface id.
type PeerError struct {
	Code   uint32
	Reason string
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("memif: peer disconnected: %s", e.Reason)
}

// protocolError is a violation by the peer; its text is sent back in our DISCONNECT.
type protocolError struct{ reason string }

func (e *protocolError) Error() string { return e.reason }

func protoErrorf(format string, a ...any) error {
	return &protocolError{reason: fmt.Sprintf(format, a...)}
}
