package memif

import (
	"fmt"
	"io"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// TestDownReason: every way a connection ends files under its fixed reason, wrapped or not, and
// a local Close wins over whatever error the teardown produced.
func TestDownReason(t *testing.T) {
	for _, c := range []struct {
		err    error
		closed bool
		want   string
	}{
		{&PeerError{Reason: "bye"}, false, portstatus.ReasonPeer},
		{fmt.Errorf("wrapped: %w", &PeerError{Reason: "x"}), false, portstatus.ReasonPeer},
		{protoErrorf("unexpected %s", "INIT"), false, portstatus.ReasonProtocol},
		{&FaultError{Region: 1}, false, portstatus.ReasonFault},
		{&EventfdError{Ring: "S2M ring 0", Problem: "not an eventfd"}, false, portstatus.ReasonEventfd},
		{fmt.Errorf("control channel closed: %w", io.EOF), false, portstatus.ReasonSocket},
		{fmt.Errorf("control channel closed: %w", io.EOF), true, portstatus.ReasonClosed},
		{ErrClosed, false, portstatus.ReasonClosed},
		{nil, false, portstatus.ReasonOther},
	} {
		if got := downReason(c.err, c.closed); got != c.want {
			t.Errorf("downReason(%v, closed=%v) = %q, want %q", c.err, c.closed, got, c.want)
		}
	}
}
