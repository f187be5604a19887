// Package eventreason spells the reasons of the Events memifnet's binaries record, for them and
// for kubectl-memifnet, which finds them by reason. An Event reason is a contract with whoever
// reads it (kubectl-memifnet, alerts, `kubectl get events --field-selector reason=...`): rename
// one only knowing that.
package eventreason

// The node agent's Events on its Node (cmd/memif-deviceplugin/internal/observe/events). A pool unit a
// previous tenant still holds is withheld, and refilled once let go; a device whose scrub failed
// is out of service, and recovered once a retried scrub worked. Their messages begin
// "unit <id> " and "device <id> ".
const (
	UnitWithheld = "PoolUnitWithheld"
	UnitRefilled = "PoolUnitRefilled"
	ScrubFailed  = "DeviceScrubFailed"
	Recovered    = "DeviceRecovered"
)

// LinkPeerNodeFull is the admission webhook's Event on a link pod that cannot join its peer:
// the peer's node has no socket slot left (cmd/memif-webhook/internal/explain).
const LinkPeerNodeFull = "LinkPeerNodeFull"
