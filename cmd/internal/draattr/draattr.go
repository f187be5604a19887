// Package draattr names the attributes and capacity of the DRA driver's devices as it publishes
// them in its ResourceSlices (cmd/memif-deviceplugin/internal/dra), and holds the data of a
// socket device in a claim's status (PortStatus). They are a contract with every reader:
// kubectl-memifnet's node and link views, the DeviceClasses' and users' CEL selectors
// (device.attributes["memifnet.io"].type, docs/dra.md).
package draattr

// Attribute names, qualified by the driver name in CEL.
const (
	Type     = "type"     // TypeSocket or TypeHugepage
	NUMANode = "numaNode" // int
	Pool     = "pool"     // hugepage pool name
	PageSize = "pageSize" // hugepage size, "2Mi" or "1Gi"
	Size     = "size"     // capacity: a unit's bytes, a slot's tmpfs bytes
)
