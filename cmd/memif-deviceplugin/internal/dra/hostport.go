package dra

import (
	"errors"
	"path/filepath"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// writeHost writes the host side of host port dev of claim plan, for the node's data plane: the
// description and the ready configs memif-cni writes for its host ports, by the same writer,
// beside theirs; always the memif server in copy mode (the pod's end, spec, is the client), the
// claim its owner. pod names the claim's consumer.
func (d *DeviceState) writeHost(plan PreparedClaim, dev PreparedDevice, spec portspec.PortSpec, pod string) error {
	return peerconf.WriteHost(d.hostDesc(dev.Name), spec,
		peerconf.Host{Socket: dev.Status.HostSocket, Slot: dev.Name, Pod: pod, Owner: hostOwner(plan)})
}

// removeHost removes the host side of host port dev of claim c if its description names c. The
// device is c's (no other prepared claim may hold it), so a description that names nobody, from
// before descriptions had an owner, is c's too; one that names another owner is left and logged.
func (d *DeviceState) removeHost(c PreparedClaim, dev PreparedDevice) error {
	err := peerconf.RemoveHost(d.hostDesc(dev.Name), hostOwner(c), true)
	if errors.Is(err, peerconf.ErrNotOwner) {
		d.opts.Log.Warn("dra: leaving a host side that is not the claim's", "claim", c.Namespace+"/"+c.Name, "device", dev.Name, "err", err)
		return nil
	}
	return err
}

// hostOwner is the claim as its host sides' descriptions name it.
func hostOwner(c PreparedClaim) peerconf.Owner { return peerconf.Owner{ClaimUID: c.UID} }

// hostDesc is the host-port description path of slot, beside which the host side's files go
// (<state>/state/host-ports/<slot>.json, as for memif-cni's host ports).
func (d *DeviceState) hostDesc(slot string) string {
	return filepath.Join(d.opts.StateDir, names.StoreSubdir, names.HostPortsSubdir, slot+".json")
}
