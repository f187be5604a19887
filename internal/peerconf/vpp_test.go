package peerconf

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// TestVPPCLIGolden checks vpp.cli against VPP's documented CLI (VPP CLI reference, memif plugin:
// "create memif socket [id <id>] [filename <path>]", "create interface memif [id <id>]
// [socket-id <socket-id>] [ring-size <size>] [buffer-size <size>] [hw-addr <mac-address>]
// <master|slave> [rx-queues <number>] [tx-queues <number>] [mode ip] [secret <string>]",
// https://s3-docs.fd.io/vpp/24.10/cli-reference/clis/clicmd_src_plugins_memif.html; no-zero-copy
// from src/plugins/memif/cli.c), byte for byte and through vppCheck, which reads the lines by
// that grammar.
func TestVPPCLIGolden(t *testing.T) {
	server := linkSpec()
	server.Role, server.Secret, server.ZeroCopy = portspec.RoleServer, "", true
	ip := linkSpec()
	ip.Mode, ip.MAC, ip.IPs, ip.ZeroCopy = portspec.ModeIP, "", []string{"10.77.0.5/24", "fd00::5/64"}, true
	for _, c := range []struct {
		name string
		spec portspec.PortSpec
		slot string
		want string
	}{
		{"ethernet client", linkSpec(), "slot-007", "" +
			"create memif socket id 10007 filename /run/memifnet/slot-007/link/memif.sock\n" +
			"create interface memif id 3 socket-id 10007 ring-size 1024 buffer-size 2048 hw-addr 02:11:22:33:44:55 slave rx-queues 2 tx-queues 2 secret 0123456789abcdef012345 no-zero-copy\n" +
			"set interface state memif10007/3 up\n"},
		// A master has no zero-copy setting; no secret, no secret word.
		{"ethernet server", server, "dra-slot-012", "" +
			"create memif socket id 20012 filename /run/memifnet/slot-007/link/memif.sock\n" +
			"create interface memif id 3 socket-id 20012 ring-size 1024 buffer-size 2048 hw-addr 02:11:22:33:44:55 master rx-queues 2 tx-queues 2\n" +
			"set interface state memif20012/3 up\n"},
		// ip mode: no MAC, mode ip, the IPAM addresses; a zero-copy slave is VPP's default.
		{"ip client", ip, "slot-000", "" +
			"create memif socket id 10000 filename /run/memifnet/slot-007/link/memif.sock\n" +
			"create interface memif id 3 socket-id 10000 ring-size 1024 buffer-size 2048 slave rx-queues 2 tx-queues 2 mode ip secret 0123456789abcdef012345\n" +
			"set interface state memif10000/3 up\n" +
			"set interface ip address memif10000/3 10.77.0.5/24\n" +
			"set interface ip address memif10000/3 fd00::5/64\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Generate(Side{Spec: c.spec, Slot: c.slot})
			if err != nil {
				t.Fatal(err)
			}
			if f.VPPCLI != c.want {
				t.Errorf("vpp.cli\n got:\n%s\nwant:\n%s", f.VPPCLI, c.want)
			}
			st := newVPPState()
			if err := st.exec(f.VPPCLI); err != nil {
				t.Fatal(err)
			}
			name := VPPInterface(c.slot, c.spec.ID)
			ifc := st.interfaces[name]
			p := c.spec
			if ifc.state != "up" || ifc.master != (p.Role == portspec.RoleServer) || ifc.ip != (p.Mode == portspec.ModeIP) ||
				ifc.ring != uint64(p.RingSize) || ifc.buffer != uint64(p.BufferSize) || ifc.rxq != uint64(p.Queues) ||
				ifc.secret != p.Secret || ifc.mac != p.MAC || strings.Join(ifc.addrs, ",") != strings.Join(p.IPs, ",") ||
				(!ifc.master && ifc.zeroCopy != p.ZeroCopy) || st.sockets[uint64(Number(c.slot))] != p.Socket {
				t.Errorf("VPP would make %s = %+v (sockets %v) from spec %+v", name, ifc, st.sockets, p)
			}
		})
	}
}

// TestVPPNodeWide: the host side's vpp.cli of every host port of a node, and the pod side's of
// every port of a pod, exec'd into one VPP: no socket id or interface is created twice.
func TestVPPNodeWide(t *testing.T) {
	st := newVPPState()
	for i := range 300 {
		for _, slot := range []string{fmt.Sprintf("slot-%03d", i), fmt.Sprintf("dra-slot-%03d", i)} {
			p := linkSpec()
			p.Link, p.Peer, p.ID = "", portspec.PeerHost, 0 // every host port has id 0 by default
			p.Socket = "/var/lib/memifnet/sockets/" + slot + "/memif.sock"
			h, err := HostSide(p, Host{Socket: p.Socket, Slot: slot, Pod: "ns/pod"})
			if err != nil {
				t.Fatal(err)
			}
			f, err := Generate(h)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.exec(f.VPPCLI); err != nil {
				t.Fatalf("%s: %v", slot, err)
			}
		}
	}
	if len(st.interfaces) != 600 {
		t.Fatalf("%d interfaces, want 600", len(st.interfaces))
	}
}

// TestHostileValues: a value that is not one plain word (a space or newline that would start
// another VPP command or argument, a ',' or '=' that would start another DPDK device argument)
// gets no vpp.cli or dpdk.args at all, never a file with an injected line. port.env quotes it
// (or refuses a control character).
func TestHostileValues(t *testing.T) {
	for _, c := range []struct {
		field, value string
		envErr       bool
	}{
		{"socket", "/run/x.sock\ncreate interface memif id 9 master", true},
		{"socket", "/run/x y.sock", false},
		{"socket", "/run/x,role=server.sock", false},
		{"secret", "s3cr3t rx-queues 200", false},
		{"secret", "a,zero-copy=yes", false},
		{"secret", "a\nexec /etc/x", true},
		{"secret", "$(reboot)'`", false},
	} {
		t.Run(c.field+"="+strings.ReplaceAll(c.value, "\n", `\n`), func(t *testing.T) {
			p := linkSpec()
			if c.field == "socket" {
				p.Socket = c.value
			} else {
				p.Secret = c.value
			}
			f, err := Generate(Side{Spec: p, Slot: "slot-001"})
			if c.envErr {
				if err == nil {
					t.Fatalf("Generate took a control character: %+v", f)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.VPPCLI != "" || f.DPDKArgs != "" || f.DPDKAppArgs != "" {
				t.Fatalf("a value with separators got peer files:\n%s\n%s", f.VPPCLI, f.DPDKArgs)
			}
			if got := shEnv(t, f.Env)["MEMIF_"+strings.ToUpper(c.field)]; got != c.value {
				t.Fatalf("sh reads %q back, want %q", got, c.value)
			}
		})
	}
}
