package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/memifnet/memifnet/cmd/internal/draattr"
)

// Attribute names of the driver's devices (qualified by the driver name in CEL:
// device.attributes["memifnet.io"].type); cmd/internal/draattr spells them for every reader.
const (
	AttrType     = draattr.Type     // "socket" or "hugepage"
	AttrNUMANode = draattr.NUMANode // int
	AttrPool     = draattr.Pool     // hugepage pool name
	AttrPageSize = draattr.PageSize // hugepage size, "2Mi" or "1Gi"
	CapSize      = draattr.Size     // capacity: a unit's bytes, a slot's tmpfs bytes
)

// AttrNetNUMANode is the NUMA node under the name the DRA network drivers publish it (DRANET,
// the SR-IOV DRA driver, and the CPU driver for alignment with them): an int, fully qualified,
// so that one claim's matchAttribute constraint spans their devices and ours.
const AttrNetNUMANode resourceapi.QualifiedName = "dra.net/numaNode"

// maxSliceDevices is the most devices one ResourceSlice may list (resource.k8s.io/v1).
const maxSliceDevices = resourceapi.ResourceSliceMaxDevices

// Resources are the node's devices as ResourceSlices of one pool named after the node: the
// socket slots, then each pool's units, with their NUMA node (also as dra.net/numaNode), pool and
// page size. Withheld units
// are left out, so that the scheduler allocates them to no claim until they are made again, and
// so are devices whose scrub failed, until a retried scrub works.
func (d *DeviceState) Resources() resourceslice.DriverResources {
	withheld := d.Withheld()
	failed := d.ScrubFailures()
	var devs []resourceapi.Device
	if d.opts.Slots != nil {
		for _, u := range d.opts.Slots.Units() {
			if failed[u.ID] != nil {
				continue
			}
			devs = append(devs, resourceapi.Device{
				Name: u.ID,
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					AttrType:        {StringValue: ptr.To(KindSocket)},
					AttrNUMANode:    {IntValue: ptr.To(int64(u.Node))},
					AttrNetNUMANode: {IntValue: ptr.To(int64(u.Node))},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					CapSize: {Value: *apiresource.NewQuantity(d.opts.SlotBytes, apiresource.BinarySI)},
				},
			})
		}
	}
	for _, p := range d.opts.Pools {
		for _, u := range p.Units.Units() {
			if withheld[u.ID] != nil || failed[u.ID] != nil {
				continue
			}
			devs = append(devs, resourceapi.Device{
				Name: u.ID,
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					AttrType:        {StringValue: ptr.To(KindHugepage)},
					AttrNUMANode:    {IntValue: ptr.To(int64(u.Node))},
					AttrNetNUMANode: {IntValue: ptr.To(int64(u.Node))},
					AttrPool:        {StringValue: ptr.To(p.Name)},
					AttrPageSize:    {StringValue: ptr.To(p.PageSize)},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					CapSize: {Value: *apiresource.NewQuantity(p.UnitSize, apiresource.BinarySI)},
				},
			})
		}
	}
	pool := resourceslice.Pool{}
	for len(devs) > 0 {
		n := min(len(devs), maxSliceDevices)
		pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: devs[:n]})
		devs = devs[n:]
	}
	if len(pool.Slices) == 0 {
		pool.Slices = []resourceslice.Slice{{}} // an empty pool: the driver runs, with no devices
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{d.opts.NodeName: pool}}
}
