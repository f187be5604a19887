// Package dra is memif-deviceplugin's Dynamic Resource Allocation driver (resource.k8s.io/v1):
// it publishes the node's DRA socket slots and hugepage units as devices in ResourceSlices, and
// prepares allocated claims: a claim with two socket devices is one memif link (its two requests
// are the link's two ends, shared by the two pods), one with a single socket device is a host
// port, and hugepage units are handed out as files. Prepare scrubs every device (a fresh tmpfs
// or file), wires the link, writes port.json and a CDI spec per claim; Unprepare scrubs again.
// Both are idempotent and survive a restart of the node agent (a checkpoint of prepared claims).
// See docs/dra.md.
//
// The names follow the Kubernetes DRA example driver (kubernetes-sigs/dra-example-driver,
// cmd/dra-example-kubeletplugin): Driver is the kubelet plugin (kubeletplugin.DRAPlugin:
// PrepareResourceClaims, UnprepareResourceClaims, the slices and the claim status), DeviceState
// the node's devices and the claims prepared on them (Prepare, Unprepare, the checkpoint of
// PreparedClaims and their PreparedDevices).
package dra
