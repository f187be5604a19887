// Package portmetricnames spells the per-port metric names once, with their help and label
// names. Three parts read it: pkg/memif/memifprom (an application's own interfaces), the node
// agent's status-file collector and kubectl-memifnet, which reads the agent's /metrics. A
// metric renamed here is renamed for all three; a dashboard or alert written against the old
// name is the only copy left to change.
//
// It imports nothing, so that the library's users and kubectl-memifnet link no Prometheus for
// a table of strings.
package portmetricnames

// Prefix starts every per-port metric's name.
const Prefix = "memifnet_port_"

// The per-port metrics, exported by memifprom (labelled port and, per queue, queue) and by the
// node agent (labelled namespace, pod, port and link; a status file sums the queues).
const (
	Up              = Prefix + "up"
	LinkTransitions = Prefix + "link_transitions_total"
	LastDisconnect  = Prefix + "last_disconnect_info"
	RxPackets       = Prefix + "rx_packets_total"
	RxBytes         = Prefix + "rx_bytes_total"
	TxPackets       = Prefix + "tx_packets_total"
	TxBytes         = Prefix + "tx_bytes_total"
	Drops           = Prefix + "drops_total"
	BadDescriptors  = Prefix + "bad_descriptors_total"
	RingFull        = Prefix + "ring_full_total"
	RxNoBuffers     = Prefix + "rx_no_buffers_total"
)

// The node agent's own: its status-file errors, the state of a link's two ends, and when the
// port's writer took the counters it reports (the status file's time): the counters change only
// when the file is rewritten (every few seconds), so a rate is their change over this time's,
// not over the time between two scrapes.
const (
	StatusErrors = Prefix + "status_errors_total"
	LinkUp       = "memifnet_link_up"
	StatusTime   = Prefix + "status_time_seconds"
)

// HelpStatusTime is StatusTime's help.
const HelpStatusTime = "When the port's application took the snapshot of these counters (its status file), Unix seconds: compute rates over this time's change."

// Help texts of the metrics both exporters share: the numbers mean the same wherever read.
// (Up's differs: the agent's reading comes from a status file that can go stale.)
const (
	HelpLinkTransitions = "Link state changes since the port was opened, by the state changed to."
	HelpLastDisconnect  = "Why the link last went down (reason from a fixed set); absent until it has."
	HelpRxPackets       = "Packets received."
	HelpRxBytes         = "Payload bytes of the packets received."
	HelpTxPackets       = "Packets queued to the peer."
	HelpTxBytes         = "Payload bytes of the packets queued to the peer."
	HelpDrops           = "Packets lost: bad descriptors, too large for the receiver's buffer, or unsendable."
	HelpBadDescriptors  = "Descriptors from the peer that failed validation."
	HelpRingFull        = "Transmit bursts cut short by a full ring (zero-copy: or an empty pool)."
	HelpRxNoBuffers     = "Receive ring refills short of pool buffers (zero-copy)."
)

// Label names.
const (
	LabelPort      = "port"
	LabelQueue     = "queue"
	LabelDirection = "direction" // DirectionRx or DirectionTx
	LabelTo        = "to"        // ToUp or ToDown
	LabelReason    = "reason"
	LabelNamespace = "namespace" // the agent's: the pod's namespace
	LabelPod       = "pod"
	LabelLink      = "link"
	LabelClaim     = "claim" // memifnet_link_up: the DRA claim of a DRA link, "" for memif-cni's
)

// Label values.
const (
	DirectionRx = "rx"
	DirectionTx = "tx"
	ToUp        = "up"
	ToDown      = "down"
)
