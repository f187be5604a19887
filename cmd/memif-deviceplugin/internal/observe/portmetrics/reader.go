package portmetrics

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/memifnet/memifnet/cmd/internal/slotwire"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// Why a status file gave no status: the values of the reason label of
// memifnet_port_status_errors_total (ReasonMissing is no error: the application writes none).
const (
	ReasonMissing    = "missing"    // no status file (an application that does not write one)
	ReasonRefused    = "refused"    // not a regular file (a symlink, FIFO, directory, device) or over the size limit
	ReasonInvalid    = "invalid"    // not a valid status file, or one about another port
	ReasonUnreadable = "unreadable" // the slot or the file could not be opened or read
)

// Reading is one port's status file, read.
type Reading struct {
	Port
	Status portstatus.Status // valid when Reason is ""
	// Stale: the writer has not rewritten the file for three of its intervals (it died or
	// hangs); its link counts as down.
	Stale  bool
	Reason string // why there is no Status: one of the Reason constants
	Err    error
}

// Up is whether the port's link is up as far as the node can tell.
func (r Reading) Up() bool { return r.Reason == "" && !r.Stale && r.Status.State == portstatus.StateUp }

// staleAfter is how many of the writer's intervals may pass without a rewrite.
const staleAfter = 3

// Read reads p's status file in its slot under slotsDir. Everything in the slot is the pod's:
// the slot is opened as the tmpfs mount the agent made, the file without following a symlink,
// without blocking (a FIFO), at most portstatus.MaxSize bytes, and decoded strictly. The cost
// is bounded whatever the pod put there: two opens, a stat and one read of at most 4 KiB.
func Read(slotsDir string, p Port, now time.Time) Reading {
	r := Reading{Port: p}
	slot, err := slotwire.OpenSlot(slotsDir, p.Slot)
	if err != nil {
		r.Reason, r.Err = ReasonUnreadable, err
		return r
	}
	defer slot.Close()
	data, err := slot.ReadFile(portstatus.File, portstatus.MaxSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.Reason = ReasonMissing
		return r
	case errors.Is(err, safefs.ErrRefused):
		r.Reason, r.Err = ReasonRefused, err
		return r
	case err != nil:
		r.Reason, r.Err = ReasonUnreadable, err
		return r
	}
	st, err := portstatus.Parse(data)
	if err == nil && st.Port != p.Port {
		err = fmt.Errorf("status file: field \"port\": %q, but slot %s holds port %q", st.Port, p.Slot, p.Port)
	}
	if err != nil {
		r.Reason, r.Err = ReasonInvalid, fmt.Errorf("%s/%s: %w", slot.Path(), portstatus.File, err)
		return r
	}
	r.Status = st
	r.Stale = now.Sub(st.Time) > staleAfter*time.Duration(st.IntervalSeconds)*time.Second
	return r
}
