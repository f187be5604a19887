package resource

import "github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"

// Provider is one kind of device: it knows how to check, scrub and hand out
// its units but nothing about the kubelet.
type Provider interface {
	// Resource is the extended resource name, e.g. memifnet.io/socket.
	Resource() string
	// Units are all devices, in a stable order.
	Units() []device.Unit
	// Check returns nil when the device is usable.
	Check(id string) error
	// Scrub removes every trace of the previous tenant.
	Scrub(id string) error
	// Mount is where the device appears in a container.
	Mount(id string) device.Mount
	// Grant returns the env for a container that gets ids (already
	// scrubbed) and writes any per-allocation files.
	Grant(ids []string) (map[string]string, error)
}
