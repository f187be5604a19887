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
