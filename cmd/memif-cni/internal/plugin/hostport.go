package plugin

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// hostEnd sets the pod's end of a host port: the socket stays in the slot, and the pod is the
// client, always: the node's data plane serves on the socket (internal/ports refuses a host port
// that asks to serve, docs/security.md row 32). The pod's end may run zero-copy; that shares only
// the pod's own memory with the node.
func hostEnd(slot string, spec *portspec.PortSpec) {
	spec.Role = portspec.HostPodRole
	spec.Socket = containerSlot(slot) + "/" + names.SocketFile
}

// hostOwner is the attachment's name in its host sides' descriptions.
func hostOwner(att *state.Attachment) peerconf.Owner {
	return peerconf.Owner{ContainerID: att.ContainerID, IfName: att.IfName, PodUID: att.PodUID}
}

// writeHostDesc writes a host port's host side for the host data plane: the description file
// (state/host-ports/<slot>.json, naming this attachment as its owner) and the ready configs
// beside it, as the DRA driver does for its host ports.
func writeHostDesc(file, hostSocket string, att *state.Attachment, spec portspec.PortSpec) error {
	slot := strings.TrimSuffix(filepath.Base(file), ".json")
	return peerconf.WriteHost(file, spec, peerconf.Host{Socket: hostSocket, Slot: slot, Pod: att.Namespace + "/" + att.Pod, Owner: hostOwner(att)})
}

// removeHostDesc removes port p's host side if its description names this attachment (or names
// nobody, when the slot is still this attachment's: slotIsOurs). One of another attachment is
// left, and reported. Call with the slot's lock held.
func (a *attachment) removeHostDesc(p state.Port, slotIsOurs bool) error {
	if p.HostDesc == "" {
		return nil
	}
	err := peerconf.RemoveHost(p.HostDesc, hostOwner(&a.rec), slotIsOurs)
	if errors.Is(err, peerconf.ErrNotOwner) {
		warn("slot %s: leaving the host side: %v", p.Slot, err)
		return nil
	}
	return err
}
