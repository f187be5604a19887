package plugin

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// HostPort is the description of a host port for a host data plane (VPP, DPDK): the socket as
// the host sees it and the host's side of the connection.
type HostPort struct {
	Socket     string `json:"socket"`
	Role       string `json:"role"` // the host's memif role
	ID         uint32 `json:"id"`
	Mode       string `json:"mode"`
	Secret     string `json:"secret,omitempty"`
	Queues     int    `json:"queues"`
	RingSize   int    `json:"ringSize"`
	BufferSize int    `json:"bufferSize"`
	Namespace  string `json:"namespace"`
	Pod        string `json:"pod"`
	Port       string `json:"port"`
}

// hostEnd sets the pod's end of a host port: the socket stays in the slot, and as a host data
// plane listens on it by default, the pod is the client unless the port says otherwise.
func hostEnd(slot string, spec *portspec.PortSpec) {
	if spec.Role == "" {
		spec.Role = "client"
	}
	spec.Socket = containerSlot(slot) + "/" + names.SocketFile
}

// writeHostDesc writes a host port's description for the host data plane to file.
func writeHostDesc(file, hostSocket string, att *state.Attachment, spec portspec.PortSpec) error {
	role := "server"
	if spec.Role == "server" {
		role = "client"
	}
	b, err := json.MarshalIndent(HostPort{Socket: hostSocket, Role: role, ID: spec.ID, Mode: spec.Mode, Secret: spec.Secret,
		Queues: spec.Queues, RingSize: spec.RingSize, BufferSize: spec.BufferSize, Namespace: att.Namespace, Pod: att.Pod, Port: spec.Name}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", file, err)
	}
	// Under the state directory, which no pod can reach.
	if err := safefs.WriteFile(file, append(b, '\n'), 0o600, safefs.WriteOptions{}); err != nil {
		return err
	}
	// The host side's DPDK, VPP and libmemif configs beside it (<slot>.dpdk.args, ...).
	return peerconf.WriteHost(file, peerconf.HostSide(spec, hostSocket, strings.TrimSuffix(filepath.Base(file), ".json"), att.Namespace+"/"+att.Pod))
}
