package plugin

import (
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// hostEnd sets the pod's end of a host port: the socket stays in the slot, and as a host data
// plane listens on it by default, the pod is the client unless the port says otherwise.
func hostEnd(slot string, spec *portspec.PortSpec) {
	if spec.Role == "" {
		spec.Role = "client"
	}
	spec.Socket = containerSlot(slot) + "/" + names.SocketFile
}

// writeHostDesc writes a host port's host side for the host data plane: the description file
// (state/host-ports/<slot>.json) and the ready configs beside it, as the DRA driver does for its
// host ports.
func writeHostDesc(file, hostSocket string, att *state.Attachment, spec portspec.PortSpec) error {
	slot := strings.TrimSuffix(filepath.Base(file), ".json")
	return peerconf.WriteHost(file, peerconf.HostSide(spec, hostSocket, slot, att.Namespace+"/"+att.Pod))
}
