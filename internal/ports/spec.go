package ports

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// Owner says whose port it is; an ethernet port's MAC is derived from it and the port's name,
// so the MAC survives whatever re-creates the port (a new sandbox, a re-prepared claim).
type Owner string

// PodOwner is the owner of a port memif-cni wires from a pod's annotation.
func PodOwner(namespace, pod string) Owner { return Owner(namespace + "/" + pod) }

// ClaimOwner is the owner of a port the DRA driver wires for a ResourceClaim: a claim and a pod
// of the same name get different MACs.
func ClaimOwner(namespace, claim string) Owner { return Owner("dra/" + namespace + "/" + claim) }

// Spec is the port.json of p as the annotation or the claim asks for it: everything but what the
// wiring decides (socket, secret, the role where p leaves it open, addresses). An ethernet port
// gets owner's stable MAC.
func (p Port) Spec(owner Owner) portspec.PortSpec {
	spec := portspec.PortSpec{
		Version: portspec.Version, Name: p.Name, Mode: p.Mode, ID: p.ID, Queues: p.Queues, Role: p.Role,
		RingSize: p.RingSize, BufferSize: p.BufferSize, ZeroCopy: p.ZeroCopy, Link: p.Link, Peer: p.Peer,
	}
	if p.Mode == portspec.ModeEthernet {
		spec.MAC = stableMAC(owner, p.Name).String()
	}
	return spec
}

// stableMAC derives a locally administered unicast MAC from the owner and the port.
func stableMAC(owner Owner, port string) net.HardwareAddr {
	sum := sha256.Sum256([]byte(string(owner) + "/" + port))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02
	return mac
}

// NewSecret is a new link's memif secret, the one both ends of the link present: 22 hex
// characters of crypto/rand (the protocol's field holds portspec.MaxSecretLen).
func NewSecret() (string, error) {
	b := make([]byte, 11)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("link secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}
