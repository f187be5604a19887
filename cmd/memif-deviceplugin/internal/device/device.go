// Package device is what the node agent's two backends, the device plugin (resource, dpserver)
// and the DRA driver (dra), share about the devices they hand out: a device's identity and NUMA
// node, where it appears in a container, and why a provider may keep one out of service. The
// providers (slots, pools) make devices in these terms and know nothing of either backend.
package device

import "errors"

// Unit is one device of a provider: a socket slot or a hugepage pool unit.
type Unit struct {
	ID string
	// Node is the NUMA node of the device.
	Node int
}

// Mount is a host path to bind into the container.
type Mount struct {
	Host      string
	Container string
	ReadOnly  bool
}

// ErrWithheld marks a device that its provider keeps out of service because a previous tenant
// still holds what the device was made of (a pool unit's old file, whose hugepages the new file
// needs). The device is held by no pod (its old file is gone), so scrubbing it again is always
// safe; the provider's Scrub tries to refill it, cheaply while the pages are not back.
var ErrWithheld = errors.New("a previous tenant still holds its old file")

// ErrScrubFailed marks a device whose scrub failed for another reason than ErrWithheld (a
// device-info file that cannot be removed, a tmpfs that cannot be mounted, a pool mount that is
// no longer hugetlbfs): the previous tenant's traces may still be there, so both backends keep
// the device out of service and scrub it again at their periodic recheck until it works.
var ErrScrubFailed = errors.New("scrub failed")

// ScrubError is a failed scrub of one device; errors.Is(err, ErrScrubFailed) holds for it.
type ScrubError struct {
	ID  string
	Err error
}

func (e *ScrubError) Error() string { return "scrub " + e.ID + ": " + e.Err.Error() }

func (e *ScrubError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrScrubFailed) hold.
func (e *ScrubError) Is(target error) bool { return target == ErrScrubFailed }
