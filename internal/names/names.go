// Package names is the one place that spells the names the parts of memifnet share: the
// Kubernetes resource names and annotation key, the state directory's layout on the node and its
// view in the container, the files in a socket slot, the environment variables the device plugin
// sets, the helper binary's name, and the limits of a port. Change a name here and every part
// follows; docs/design.md shows how they fit together.
//
// It imports nothing, so anything in the module can use it. The in-pod library's users get the
// names they need from pkg/memif/portspec, which takes them from here.
package names

// Kubernetes names.
const (
	// SocketResource is the extended resource of socket slots: one unit is one memif port.
	SocketResource = ResourcePrefix + "socket"
	// ResourcePrefix + a pool name is the extended resource of a hugepage pool.
	ResourcePrefix = "memifnet.io/"
	// DefaultPool is the hugepage pool the device plugin offers without a config.
	DefaultPool = "hugepool"
	// PortsAnnotation is the pod annotation that asks for memif ports.
	PortsAnnotation = "memifnet.io/ports"
	// DRADriver is the Dynamic Resource Allocation driver name (DeviceClasses select on it).
	DRADriver = "memifnet.io"
	// LinkLabelPrefix + a link name is the label the admission webhook puts on each pod of that
	// link (value: the pod's port on it); the pods' required pod affinity selects it, so both
	// ends of a link land on one node. A link name is a DNS label, so the key is a valid label key.
	LinkLabelPrefix = "link.memifnet.io/"
)

// The node's state directory and its layout.
const (
	// StateDir is the default state directory of the device plugin and the CNI plugin.
	StateDir = "/var/lib/memifnet"
	// SocketsSubdir holds one directory per socket slot: <state>/sockets/<slot>/.
	SocketsSubdir = "sockets"
	// LinksSubdir holds one directory per pod-to-pod link: <state>/links/<namespace>/<link>/.
	LinksSubdir = "links"
	// StoreSubdir holds the CNI plugin's records: <state>/state/.
	StoreSubdir = "state"
	// HostPortsSubdir holds the host side of every host port, for the node's data plane:
	// <state>/state/host-ports/<slot>.* (memif-cni's and the DRA driver's; slot names differ).
	HostPortsSubdir = "host-ports"
	// PoolsSubdir holds each pool's hugetlbfs mount: <state>/pools/<pool>/<unit>.
	PoolsSubdir = "pools"
	// DRASubdir holds the DRA driver's checkpoint and link directories: <state>/dra/.
	DRASubdir = "dra"
	// SlotPrefix names the device plugin's slots, <state>/sockets/slot-NNN.
	SlotPrefix = "slot"
	// DRASlotPrefix names the DRA driver's slots, <state>/sockets/dra-slot-NNN, apart from the
	// device plugin's slot-NNN.
	DRASlotPrefix = "dra-slot"
)

// The container's view.
const (
	// ContainerDir is where a container sees its socket slots: /run/memifnet/<slot>/.
	ContainerDir = "/run/memifnet"
	// ContainerPoolsDir is where a container sees its pool units.
	ContainerPoolsDir = ContainerDir + "/" + PoolsSubdir
)

// Files in a socket slot.
const (
	// PortFile is the port spec memif-cni writes into the slot (the in-pod contract).
	PortFile = "port.json"
	// SocketFile is the memif control socket: <slot>/memif.sock for a host port,
	// <slot>/link/memif.sock for a link port.
	SocketFile = "memif.sock"
	// LinkSubdir is where memif-cni mounts a link port's link directory in the slot.
	LinkSubdir = "link"
	// StatusFile is where the pod's application reports the port's link state and counters
	// (pkg/memif/portstatus): written by the pod, read by the node agent as hostile input.
	StatusFile = "status.json"
)

// Ready-made configurations beside port.json, one per memif implementation (internal/peerconf):
// written in the slot for the pod's side, and as <slot>.<name> beside a host port's description
// (state/host-ports/<slot>.json) for the host's side.
const (
	// DPDKArgsFile holds the EAL argument that makes DPDK's net_memif open the port.
	DPDKArgsFile = "dpdk.args"
	// DPDKAppArgsFile holds the queue count as testpmd's application options (DPDK takes the
	// queue count from the application, not from the device argument).
	DPDKAppArgsFile = "dpdk.app-args"
	// VPPFile holds the VPP CLI lines that create the port (for "exec" or unix { exec }).
	VPPFile = "vpp.cli"
	// EnvFile holds the port as KEY=value lines (libmemif, scripts, any language). Beside a
	// host port's description it is <slot>.env.
	EnvFile = "port.env"
	// HostEnvSuffix names the host side's EnvFile: state/host-ports/<slot>.env.
	HostEnvSuffix = ".env"
)

// Environment variables the device plugin sets in a container, and the library reads.
const (
	// EnvSockets lists the slot IDs the container got, comma-separated.
	EnvSockets = "MEMIFNET_SOCKETS"
	// EnvPools lists the container paths of the pool units the container got, comma-separated.
	EnvPools = "MEMIFNET_POOLS"
	// EnvDir overrides ContainerDir for the library (tests, or a pod that mounts slots elsewhere).
	EnvDir = "MEMIFNET_DIR"
)

// The sources the agent and memif-cni give their mounts: they show in /proc/self/mountinfo and
// are how an uninstall or a cluster teardown tells memifnet's mounts from anything else there.
const (
	// SlotMountSource marks a socket slot's tmpfs (device plugin and DRA slots).
	SlotMountSource = "memifnet-slot"
	// LinkMountSource marks a link directory's tmpfs.
	LinkMountSource = "memifnet-link"
	// PoolMountSourcePrefix, followed by the pool's name, marks a hugepage pool's hugetlbfs.
	PoolMountSourcePrefix = "memifnet-"
)

// IsMemifnetMount says whether a mount of fstype with source is one memifnet makes.
func IsMemifnetMount(fstype, source string) bool {
	switch fstype {
	case "tmpfs":
		return source == SlotMountSource || source == LinkMountSource
	case "hugetlbfs":
		// Spelled out rather than strings.HasPrefix: this package imports nothing.
		return len(source) > len(PoolMountSourcePrefix) && source[:len(PoolMountSourcePrefix)] == PoolMountSourcePrefix
	}
	return false
}

// PodInfoHelper is the binary memif-cni runs, from its own directory, to read a pod's annotations
// from the kubelet or the API server when the runtime passes none.
const PodInfoHelper = "memif-cni-podinfo"

// The kubelet's paths (Kubernetes' names, spelled once here for the parts that cannot import
// k8s.io/kubelet).
const (
	// KubeletDir is the kubelet's default root directory.
	KubeletDir = "/var/lib/kubelet"
	// PodResourcesSocket is the PodResources API socket, relative to KubeletDir.
	PodResourcesSocket = "pod-resources/kubelet.sock"
)

// Limits of a port, as the annotation and port.json state them: the contract every memif
// implementation in a pod can honour, which can be narrower than what pkg/memif itself accepts.
const (
	// MaxPortNameLen is the longest port name: a Linux interface name holds 15 characters.
	MaxPortNameLen = 15
	// MaxLinkNameLen is the longest link name, a DNS label (it names a directory).
	MaxLinkNameLen = 63
	// MaxQueues is the most queue pairs of a port: libmemif counts rings in a byte.
	MaxQueues = 255
	// MinRingSize and MaxRingSize bound the ring entries (a power of two): 2^15 is the most that
	// free-running 16-bit ring indices can tell apart from an empty ring.
	MinRingSize = 2
	MaxRingSize = 1 << 15
	// MinBufferSize and MaxBufferSize bound the bytes per buffer. The protocol needs a buffer to
	// hold one byte, no more: a longer packet is chained over several (DPDK's net_memif takes
	// bsize 1..65535, libmemif any non-zero buffer_size). Both take the size as a 16-bit number,
	// so a port.json with larger buffers could not be applied by a pod whose app is built on them.
	MinBufferSize = 1
	MaxBufferSize = 1<<16 - 1
)
