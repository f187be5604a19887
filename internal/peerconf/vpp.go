package peerconf

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// VPP's memif CLI, as its CLI reference documents it (the same from VPP 19.01 to 24.10,
// https://s3-docs.fd.io/vpp/24.10/cli-reference/clis/clicmd_src_plugins_memif.html):
//
//	create memif socket [id <id>] [filename <path>]
//	create interface memif [id <id>] [socket-id <socket-id>] [ring-size <size>] [buffer-size <size>]
//	    [hw-addr <mac-address>] <master|slave> [rx-queues <number>] [tx-queues <number>] [mode ip] [secret <string>]
//
// and the interface commands of vnet (set interface state <if> up, set interface ip address
// <if> <address>/<width>). src/plugins/memif/cli.c also reads no-zero-copy (a slave then copies
// instead of handing its buffers to the master); a socket id must not be 0 (VPP's default socket)
// or ~0; the ring size is a power of two up to 32768; 1..255 queues. VPP names the interface
// memif<socket-id>/<id> (format_memif_device_name). There is no punt/inject mode: "mode ip" is the
// only mode the CLI takes besides the default Ethernet. master/slave are VPP's names for the
// server and client roles.

// VPPInterface is VPP's name of the interface vpp.cli creates for port id on slot.
func VPPInterface(slot string, id uint32) string {
	return "memif" + strconv.FormatUint(uint64(Number(slot)), 10) + "/" + strconv.FormatUint(uint64(id), 10)
}

// vppCLI returns vpp.cli, or why VPP cannot take the port. The lines are plain commands (VPP's
// exec has no comment syntax), one per line, so every port's file of a node can be exec'd into
// one VPP: the socket id is the slot's Number.
func vppCLI(s Side) (string, string) {
	p := s.Spec
	switch {
	case p.Mode == portspec.ModePuntInject:
		return "", "VPP's memif has no punt/inject mode (create interface memif takes only mode ip)"
	case !isToken(p.Socket):
		return "", fmt.Sprintf("socket path %q is not one VPP CLI word", p.Socket)
	case p.Secret != "" && !isToken(p.Secret):
		return "", "the secret is not one VPP CLI word"
	case p.MAC != "" && !isMAC(p.MAC):
		return "", fmt.Sprintf("MAC %q is not xx:xx:xx:xx:xx:xx", p.MAC)
	}
	var addrs []string
	for _, ip := range p.IPs {
		pfx, err := netip.ParsePrefix(ip)
		if err != nil {
			return "", fmt.Sprintf("address %q is not an address/width", ip)
		}
		addrs = append(addrs, pfx.String())
	}
	sock := strconv.FormatUint(uint64(Number(s.Slot)), 10)
	ifc := VPPInterface(s.Slot, p.ID)
	var b strings.Builder
	fmt.Fprintf(&b, "create memif socket id %s filename %s\n", sock, p.Socket)
	b.WriteString(vppCreateInterface(p, sock))
	fmt.Fprintf(&b, "set interface state %s up\n", ifc)
	for _, a := range addrs {
		fmt.Fprintf(&b, "set interface ip address %s %s\n", ifc, a)
	}
	return b.String(), ""
}

// vppCreateInterface is the create interface memif line, its options in the documented order.
func vppCreateInterface(p portspec.PortSpec, sock string) string {
	w := []string{"create interface memif", "id", strconv.FormatUint(uint64(p.ID), 10), "socket-id", sock,
		"ring-size", strconv.Itoa(p.RingSize), "buffer-size", strconv.Itoa(p.BufferSize)}
	if p.MAC != "" && p.Mode == portspec.ModeEthernet {
		w = append(w, "hw-addr", p.MAC)
	}
	role := "slave"
	if p.Role == portspec.RoleServer {
		role = "master"
	}
	q := strconv.Itoa(p.Queues)
	w = append(w, role, "rx-queues", q, "tx-queues", q)
	if p.Mode == portspec.ModeIP {
		w = append(w, "mode", "ip")
	}
	if p.Secret != "" {
		w = append(w, "secret", p.Secret)
	}
	if p.Role == portspec.RoleClient && !p.ZeroCopy {
		// VPP's slave defaults to zero-copy; port.json's zeroCopy says what the client end does.
		w = append(w, "no-zero-copy")
	}
	return strings.Join(w, " ") + "\n"
}
