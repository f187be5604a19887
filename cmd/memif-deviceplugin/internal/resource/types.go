package resource

import "errors"

// Unit is one allocatable device of a provider.
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

// Provider is one kind of device: it knows how to check, scrub and hand out
// its units but nothing about the kubelet.
type Provider interface {
	// Resource is the extended resource name, e.g. memifnet.io/socket.
	Resource() string
	// Units are all devices, in a stable order.
	Units() []Unit
	// Check returns nil when the device is usable.
	Check(id string) error
	// Scrub removes every trace of the previous tenant.
	Scrub(id string) error
	// Mount is where the device appears in a container.
	Mount(id string) Mount
	// Grant returns the env for a container that gets ids (already
	// scrubbed) and writes any per-allocation files.
	Grant(ids []string) (map[string]string, error)
}

// ErrWithheld marks a device that its provider keeps out of service because a previous tenant
// still holds what the device was made of (a pool unit's old file, whose hugepages the new file
// needs). The device is held by no pod (its old file is gone), so scrubbing it again is always
// safe; the provider's Scrub tries to refill it, cheaply while the pages are not back.
var ErrWithheld = errors.New("a previous tenant still holds its old file")
