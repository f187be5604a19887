// Package peerconf turns a port spec into ready-made configuration for the three reference memif
// implementations, so that a DPDK, VPP or libmemif program finds its port without parsing
// port.json: the EAL argument of DPDK's net_memif (dpdk.args, with the queue count as testpmd's
// options in dpdk.app-args), VPP CLI lines (vpp.cli) and KEY=value lines (port.env).
//
// The generator is pure (Generate: a Side in, file contents out); WriteSlot, WriteHost and their
// removals put the files beside port.json in a slot and beside a host port's description.
//
// Every value that reaches a DPDK device argument or a VPP CLI line must be a plain token (see
// isToken): a host VPP runs the host side's vpp.cli as root, so no field may carry a space, a
// newline or a separator that would start another command or argument. A port whose values a
// peer cannot take, or whose mode or sizes it does not support, gets no file for that peer; its
// port.env says why in a comment.
package peerconf

import (
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// Side is one end of a port, as its configuration is written for it.
type Side struct {
	// Spec is this end: its role, its view of the socket path, its MAC and addresses.
	Spec portspec.PortSpec
	// Slot is the socket slot of the port; it fixes the DPDK device name and the VPP socket id
	// (Number), which are then unique among a pod's ports and among a node's host ports.
	Slot string
	// Pod is namespace/name of the pod, set for the host side only (HostSide): a Side with Pod
	// set is a host side, which Generate writes only as the server in copy mode.
	Pod string
	// PeerIPs are the other end's addresses (the pod's IPAM addresses, for the host side).
	PeerIPs []string
}

// Files are the contents of the configuration files of one side. An empty content means the
// file is not written (and removed if present): the peer cannot take this port.
type Files struct {
	DPDKArgs    string // names.DPDKArgsFile
	DPDKAppArgs string // names.DPDKAppArgsFile
	VPPCLI      string // names.VPPFile
	Env         string // names.EnvFile
}

// Device numbers (Number): far from the small numbers people give sockets and devices by hand
// (VPP's socket 0 is its default socket), the device plugin's slots and the DRA driver's apart.
const (
	slotBase   = 10000  // slot-NNN -> 10000+NNN
	draBase    = 20000  // dra-slot-NNN -> 20000+NNN
	hashedBase = 100000 // any other name: a hash at or above this
	maxIndex   = 9999   // slot indexes above this are hashed (the agents make at most 4096)
)

// Number is the slot's device number: DPDK's device is net_memif<Number>, VPP's socket id is
// Number and its interface memif<Number>/<id>. It is fixed by the slot's name, so two ports of a
// pod (or two host ports of a node) never share it: slot-007 is 10007, dra-slot-007 is 20007.
// A name the node agents do not make (tests, a hand-made slot) gets a hash above 100000, which
// can collide with another such name.
func Number(slot string) uint32 {
	if n, ok := slotIndex(slot, names.DRASlotPrefix+"-"); ok {
		return draBase + n
	}
	if n, ok := slotIndex(slot, names.SlotPrefix+"-"); ok {
		return slotBase + n
	}
	h := fnv.New32a()
	h.Write([]byte(slot))
	return hashedBase + h.Sum32()%(1<<31-hashedBase)
}

// slotIndex parses <prefix><digits> with an index of at most maxIndex.
func slotIndex(slot, prefix string) (uint32, bool) {
	digits, ok := strings.CutPrefix(slot, prefix)
	if !ok || digits == "" || len(digits) > 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || n > maxIndex {
		return 0, false
	}
	return uint32(n), true
}

// Host says where and whose a host port's host side is.
type Host struct {
	Socket string // the socket as the node sees it (<state>/sockets/<slot>/memif.sock)
	Slot   string // the port's slot
	Pod    string // namespace/name of the pod
	Owner  Owner  // the attachment the host side belongs to
}

// HostSide is the host's end of a host port whose pod end is pod. The host's end is always the
// memif server in copy mode, whatever the pod's spec says about zero-copy: a client would dial
// the socket by its path in the pod's slot, which the pod can replace (with a symlink to another
// pod's socket), and a zero-copy client would hand the node data plane's own buffer memory (DPDK's
// memsegs, VPP's buffer pools) to the pod. So the pod's end must be the client (it may run
// zero-copy: that shares only the pod's own memory with the node); a pod end that serves is
// refused, never turned into a client host side. The host's end has the socket as the host sees
// it, a MAC of its own (derived from the pod's, so it is stable too), no addresses of its own, and
// the pod's addresses as the peer's.
func HostSide(pod portspec.PortSpec, h Host) (Side, error) {
	if pod.Peer != portspec.PeerHost || pod.Role != portspec.RoleClient {
		return Side{}, fmt.Errorf("host side of port %q (peer %q, role %q): only a host port whose pod end is the %s has a host side; "+
			"the node's end of a host port is always the %s", pod.Name, pod.Peer, pod.Role, portspec.RoleClient, portspec.RoleServer)
	}
	if h.Pod == "" {
		return Side{}, fmt.Errorf("host side of port %q: no pod named", pod.Name)
	}
	s := pod
	s.Role, s.ZeroCopy = portspec.RoleServer, false
	s.Socket = h.Socket
	s.IPs = nil
	s.File = ""
	if pod.MAC != "" {
		s.MAC = hostMAC(pod.MAC)
	}
	return Side{Spec: s, Slot: h.Slot, Pod: h.Pod, PeerIPs: pod.IPs}, nil
}

// hostMAC derives a locally administered unicast MAC from the pod end's MAC: the two ends of an
// Ethernet link must not share an address.
func hostMAC(podMAC string) string {
	sum := sha256.Sum256([]byte("host/" + podMAC))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02
	return mac.String()
}

// Generate returns the configuration files of one side. It fails only when the spec is invalid,
// a host side is not a copy-mode server, or a value cannot be written even quoted into port.env
// (a control character); a peer that cannot take the port gets an empty file and a comment in
// Env saying why.
func Generate(s Side) (Files, error) {
	if err := s.Spec.Validate(); err != nil {
		return Files{}, fmt.Errorf("port spec: %w", err)
	}
	if s.Pod != "" && (s.Spec.Role != portspec.RoleServer || s.Spec.ZeroCopy) {
		// Defence in depth behind HostSide: no node side that dials or shares node memory.
		return Files{}, fmt.Errorf("host side of port %q: role %s, zero-copy %v; the node's end of a host port is always the %s, in copy mode",
			s.Spec.Name, s.Spec.Role, s.Spec.ZeroCopy, portspec.RoleServer)
	}
	var f Files
	var notes []string
	if args, app, why := dpdkArgs(s); why != "" {
		notes = append(notes, "no "+names.DPDKArgsFile+": "+why)
	} else {
		f.DPDKArgs, f.DPDKAppArgs = args, app
	}
	if cli, why := vppCLI(s); why != "" {
		notes = append(notes, "no "+names.VPPFile+": "+why)
	} else {
		f.VPPCLI = cli
	}
	env, err := envFile(s, f, notes)
	if err != nil {
		return Files{}, err
	}
	f.Env = env
	return f, nil
}

// isToken reports whether s can stand unquoted as one word everywhere it is written: a value of
// a DPDK device argument (split at ',' and '=' by rte_kvargs), a VPP CLI argument (read up to
// white space by unformat's %s), and a shell word (no white space, quotes, globs or $).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._/:@+-", c) >= 0) {
			return false
		}
	}
	return true
}

// log2 of a power of two.
func log2(n int) int {
	k := 0
	for n > 1 {
		n >>= 1
		k++
	}
	return k
}
