package peerconf

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// DPDK 22.11's net_memif (drivers/net/memif/rte_eth_memif.c, the Debian package
// librte-net-memif23 installed here; its PMD_INFO_STRING lists id, role=server|client, bsize,
// rsize, socket, socket-abstract=yes|no, mac, zero-copy=yes|no, secret):
//   - rsize is the log2 of the ring size, 1..14 (ETH_MEMIF_MAX_LOG2_RING_SIZE): rings up to
//     16384 entries;
//   - bsize is 1..65535;
//   - socket-abstract defaults to yes (an abstract socket named after the path): memifnet's
//     sockets are files, so it is always written as no;
//   - zero-copy=yes needs EAL --single-file-segments (probe fails without it) and only means
//     something on a client;
//   - only Ethernet mode ("At this moment, only Ethernet mode is supported", doc/guides/nics/memif.rst);
//   - the queue count is the application's (rte_eth_dev_configure; testpmd --rxq/--txq), not a
//     device argument.
const dpdkMaxLog2Ring = 14

// DPDKDevice is the net_memif device name of a slot's port: rte_eth_dev_get_port_by_name finds
// the DPDK port id by it.
func DPDKDevice(slot string) string {
	return "net_memif" + strconv.FormatUint(uint64(Number(slot)), 10)
}

// dpdkArgs returns dpdk.args and dpdk.app-args, or why DPDK cannot take the port.
//
// dpdk.args is one line of EAL arguments: --vdev=net_memif<N>,... and, for a zero-copy client,
// --single-file-segments. An application with several ports puts every port's line on its command
// line (dpdk-testpmd $(cat /run/memifnet/*/dpdk.args) ...); the device names differ (N is the
// slot's Number) and the DPDK port ids follow the order of the --vdev arguments.
func dpdkArgs(s Side) (args, app, why string) {
	p := s.Spec
	switch {
	case p.Mode != portspec.ModeEthernet:
		return "", "", fmt.Sprintf("DPDK's net_memif takes Ethernet mode only; this port is %s", p.Mode)
	case log2(p.RingSize) > dpdkMaxLog2Ring:
		return "", "", fmt.Sprintf("DPDK's net_memif takes rings of up to %d entries (rsize<=%d); this port has %d", 1<<dpdkMaxLog2Ring, dpdkMaxLog2Ring, p.RingSize)
	case !isToken(p.Socket):
		return "", "", fmt.Sprintf("socket path %q is not a plain DPDK device argument value", p.Socket)
	case p.Secret != "" && !isToken(p.Secret):
		return "", "", "the secret is not a plain DPDK device argument value"
	case p.MAC != "" && !isMAC(p.MAC):
		return "", "", fmt.Sprintf("MAC %q is not xx:xx:xx:xx:xx:xx", p.MAC)
	}
	zeroCopy := p.ZeroCopy && p.Role == portspec.RoleClient
	kv := []string{
		"--vdev=" + DPDKDevice(s.Slot),
		"role=" + p.Role,
		"id=" + strconv.FormatUint(uint64(p.ID), 10),
		"socket=" + p.Socket,
		"socket-abstract=no",
		"rsize=" + strconv.Itoa(log2(p.RingSize)),
		"bsize=" + strconv.Itoa(p.BufferSize),
	}
	if p.Secret != "" {
		kv = append(kv, "secret="+p.Secret)
	}
	kv = append(kv, "zero-copy="+yesNo(zeroCopy))
	if p.MAC != "" {
		kv = append(kv, "mac="+p.MAC)
	}
	args = strings.Join(kv, ",")
	if zeroCopy {
		args += " --single-file-segments"
	}
	q := strconv.Itoa(p.Queues)
	return args + "\n", "--rxq=" + q + " --txq=" + q + "\n", ""
}

// isMAC reports whether s is a 48-bit MAC in the colon form DPDK's rte_ether_unformat_addr and
// VPP's unformat_ethernet_address both read.
func isMAC(s string) bool {
	hw, err := net.ParseMAC(s)
	return err == nil && len(hw) == 6 && len(s) == 17 && s[2] == ':'
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
