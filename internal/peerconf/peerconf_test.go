package peerconf

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// linkSpec is a link port as memif-cni writes it for the pod of slot-007.
func linkSpec() portspec.PortSpec {
	return portspec.PortSpec{
		Version: portspec.Version, Name: "east", Role: portspec.RoleClient, Mode: portspec.ModeEthernet,
		ID: 3, Socket: "/run/memifnet/slot-007/link/memif.sock", Secret: "0123456789abcdef012345",
		Queues: 2, RingSize: 1024, BufferSize: 2048, MAC: "02:11:22:33:44:55", Link: "chain-1",
	}
}

func TestNumber(t *testing.T) {
	for _, c := range []struct {
		slot string
		want uint32
	}{
		{"slot-000", 10000}, {"slot-007", 10007}, {"slot-4095", 14095}, {"slot-9999", 19999},
		{"dra-slot-000", 20000}, {"dra-slot-042", 20042}, {"dra-slot-4095", 24095},
	} {
		if got := Number(c.slot); got != c.want {
			t.Errorf("Number(%q) = %d, want %d", c.slot, got, c.want)
		}
	}
	// Names the agents do not make are hashed above the slot ranges, below 2^31.
	for _, s := range []string{"slot-10000", "slot-", "slot-x1", "s1", "dra-slot-12345", "slot-0001x"} {
		if n := Number(s); n < hashedBase || n >= 1<<31 {
			t.Errorf("Number(%q) = %d, want a hash in [%d, 2^31)", s, n, hashedBase)
		}
	}
	// Every slot either agent can make (up to 4096 each) has its own number.
	seen := map[uint32]string{}
	for i := range 4096 {
		for _, s := range []string{fmt.Sprintf("slot-%03d", i), fmt.Sprintf("dra-slot-%03d", i)} {
			n := Number(s)
			if prev, dup := seen[n]; dup {
				t.Fatalf("Number(%q) = Number(%q) = %d", s, prev, n)
			}
			seen[n] = s
		}
	}
}

func TestDPDKArgsGolden(t *testing.T) {
	client := linkSpec()
	server := linkSpec()
	server.Role, server.ZeroCopy, server.RingSize, server.BufferSize = portspec.RoleServer, true, 2, 1
	zc := linkSpec()
	zc.ZeroCopy, zc.Secret, zc.RingSize = true, "", 16384
	for _, c := range []struct {
		name      string
		spec      portspec.PortSpec
		slot      string
		args, app string
	}{
		{"client", client, "slot-007",
			"--vdev=net_memif10007,role=client,id=3,socket=/run/memifnet/slot-007/link/memif.sock,socket-abstract=no,rsize=10,bsize=2048,secret=0123456789abcdef012345,zero-copy=no,mac=02:11:22:33:44:55\n",
			"--rxq=2 --txq=2\n"},
		// zero-copy is the client's: a server copies whatever port.json says.
		{"server", server, "dra-slot-001",
			"--vdev=net_memif20001,role=server,id=3,socket=/run/memifnet/slot-007/link/memif.sock,socket-abstract=no,rsize=1,bsize=1,secret=0123456789abcdef012345,zero-copy=no,mac=02:11:22:33:44:55\n",
			"--rxq=2 --txq=2\n"},
		// DPDK probes a zero-copy device only with --single-file-segments; no secret, no key.
		{"zero-copy client", zc, "slot-000",
			"--vdev=net_memif10000,role=client,id=3,socket=/run/memifnet/slot-007/link/memif.sock,socket-abstract=no,rsize=14,bsize=2048,zero-copy=yes,mac=02:11:22:33:44:55 --single-file-segments\n",
			"--rxq=2 --txq=2\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Generate(Side{Spec: c.spec, Slot: c.slot})
			if err != nil {
				t.Fatal(err)
			}
			if f.DPDKArgs != c.args || f.DPDKAppArgs != c.app {
				t.Errorf("dpdk.args\n got %q\nwant %q\ndpdk.app-args got %q want %q", f.DPDKArgs, c.args, f.DPDKAppArgs, c.app)
			}
		})
	}
}

// TestPeerModes: which peer takes which mode and size (docs/peers.md says the same).
func TestPeerModes(t *testing.T) {
	for _, c := range []struct {
		name      string
		edit      func(*portspec.PortSpec)
		dpdk, vpp bool
		note      string
	}{
		{"ethernet", func(*portspec.PortSpec) {}, true, true, ""},
		{"ip", func(p *portspec.PortSpec) { p.Mode, p.MAC = portspec.ModeIP, "" }, false, true, "no dpdk.args: DPDK's net_memif takes Ethernet mode only; this port is ip"},
		{"punt-inject", func(p *portspec.PortSpec) { p.Mode, p.MAC = portspec.ModePuntInject, "" }, false, false, "no vpp.cli: VPP's memif has no punt/inject mode"},
		{"ring 32768", func(p *portspec.PortSpec) { p.RingSize = 32768 }, false, true, "no dpdk.args: DPDK's net_memif takes rings of up to 16384 entries (rsize<=14); this port has 32768"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := linkSpec()
			c.edit(&p)
			f, err := Generate(Side{Spec: p, Slot: "slot-001"})
			if err != nil {
				t.Fatal(err)
			}
			if (f.DPDKArgs != "") != c.dpdk || (f.DPDKAppArgs != "") != c.dpdk || (f.VPPCLI != "") != c.vpp {
				t.Errorf("dpdk.args %q, vpp.cli %q; want dpdk %v, vpp %v", f.DPDKArgs, f.VPPCLI, c.dpdk, c.vpp)
			}
			if f.Env == "" {
				t.Fatal("no port.env")
			}
			if c.note != "" && !strings.Contains(f.Env, "\n# "+c.note) {
				t.Errorf("port.env does not say %q:\n%s", c.note, f.Env)
			}
			env := parseEnv(t, f.Env)
			if (env["MEMIF_DPDK_DEVICE"] != "") != c.dpdk || (env["MEMIF_VPP_INTERFACE"] != "") != c.vpp {
				t.Errorf("MEMIF_DPDK_DEVICE %q, MEMIF_VPP_INTERFACE %q; want dpdk %v, vpp %v", env["MEMIF_DPDK_DEVICE"], env["MEMIF_VPP_INTERFACE"], c.dpdk, c.vpp)
			}
		})
	}
}

func TestInvalidSpec(t *testing.T) {
	p := linkSpec()
	p.RingSize = 1000
	if _, err := Generate(Side{Spec: p, Slot: "slot-001"}); err == nil || !strings.Contains(err.Error(), `"ringSize"`) {
		t.Fatalf("Generate of a spec with ringSize 1000: %v, want an error naming the field", err)
	}
}

// hostOf is the host of a host port in slot for these tests.
func hostOf(socket, slot string) Host {
	return Host{Socket: socket, Slot: slot, Pod: "ns/p", Owner: Owner{ContainerID: "c1", IfName: "net1", PodUID: "u1"}}
}

// TestHostSide: the host's end is the server in copy mode, with the host's socket path, a MAC of
// its own, the pod's addresses as the peer's, and the pod's name.
func TestHostSide(t *testing.T) {
	pod := linkSpec()
	pod.Link, pod.Peer, pod.Socket, pod.Mode, pod.MAC, pod.IPs = "", portspec.PeerHost, "/run/memifnet/slot-003/memif.sock", portspec.ModeIP, "", []string{"10.77.0.5/24"}
	h, err := HostSide(pod, hostOf("/var/lib/memifnet/sockets/slot-003/memif.sock", "slot-003"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Spec.Role != portspec.RoleServer || h.Spec.Socket != "/var/lib/memifnet/sockets/slot-003/memif.sock" || h.Spec.IPs != nil || h.Pod != "ns/p" || strings.Join(h.PeerIPs, ",") != "10.77.0.5/24" {
		t.Fatalf("HostSide = %+v", h)
	}
	f, err := Generate(h)
	if err != nil {
		t.Fatal(err)
	}
	env := parseEnv(t, f.Env)
	for k, want := range map[string]string{"MEMIF_ROLE": "server", "MEMIF_ZERO_COPY": "false", "MEMIF_POD": "ns/p", "MEMIF_PEER_IPS": "10.77.0.5/24", "MEMIF_IPS": "", "MEMIF_VPP_INTERFACE": "memif10003/3"} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	if _, ok := env["MEMIF_LINK"]; ok {
		t.Error("host side's port.env has MEMIF_LINK")
	}
	// The pod's address is the pod's: the host VPP gets none of it.
	if strings.Contains(f.VPPCLI, "ip address") {
		t.Errorf("host vpp.cli sets an address:\n%s", f.VPPCLI)
	}
	eth := linkSpec()
	eth.Link, eth.Peer = "", portspec.PeerHost
	hs, err := HostSide(eth, hostOf("/h/memif.sock", "slot-007"))
	if err != nil {
		t.Fatal(err)
	}
	if hw, err := net.ParseMAC(hs.Spec.MAC); hs.Spec.MAC == eth.MAC || !isMAC(hs.Spec.MAC) || err != nil || hw[0]&3 != 2 {
		t.Errorf("host MAC %q for pod MAC %q: want another locally administered unicast MAC", hs.Spec.MAC, eth.MAC)
	}
	if again, _ := HostSide(eth, hostOf("/h/memif.sock", "slot-007")); again.Spec.MAC != hs.Spec.MAC {
		t.Errorf("host MAC not stable: %q then %q", hs.Spec.MAC, again.Spec.MAC)
	}
}

// TestHostSideIsAlwaysACopyServer (docs/security.md rows 32, 33): whatever the pod's spec says,
// the node's end of a host port is the server in copy mode; a pod end that serves (which made the
// node's end a client: a dial of a path in the pod's slot, and with zeroCopy the node data plane's
// buffer memory handed to the pod) gets no host side at all, and Generate refuses a host side
// that would dial or share node memory however it was built.
func TestHostSideIsAlwaysACopyServer(t *testing.T) {
	pod := linkSpec()
	pod.Link, pod.Peer, pod.Socket, pod.Secret = "", portspec.PeerHost, "/run/memifnet/slot-003/memif.sock", ""
	host := hostOf("/var/lib/memifnet/sockets/slot-003/memif.sock", "slot-003")
	for _, zc := range []bool{false, true} {
		pod.ZeroCopy = zc
		h, err := HostSide(pod, host)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Generate(h)
		if err != nil {
			t.Fatal(err)
		}
		wantArgs := "--vdev=net_memif10003,role=server,id=3,socket=/var/lib/memifnet/sockets/slot-003/memif.sock,socket-abstract=no,rsize=10,bsize=2048,zero-copy=no,mac=" + h.Spec.MAC + "\n"
		if f.DPDKArgs != wantArgs {
			t.Errorf("zero-copy pod %v: host dpdk.args\n got %q\nwant %q", zc, f.DPDKArgs, wantArgs)
		}
		if !strings.Contains(f.VPPCLI, " master ") || strings.Contains(f.VPPCLI, " slave ") || parseEnv(t, f.Env)["MEMIF_ZERO_COPY"] != "false" {
			t.Errorf("zero-copy pod %v: host vpp.cli %q, port.env %q", zc, f.VPPCLI, f.Env)
		}
	}
	for _, c := range []struct {
		name string
		edit func(*portspec.PortSpec)
	}{
		{"pod serves", func(p *portspec.PortSpec) { p.Role = portspec.RoleServer }},
		{"pod serves, zero-copy", func(p *portspec.PortSpec) { p.Role, p.ZeroCopy = portspec.RoleServer, true }},
		{"a link port", func(p *portspec.PortSpec) { p.Peer, p.Link = "", "chain-1" }},
	} {
		p := pod
		c.edit(&p)
		if h, err := HostSide(p, host); err == nil || !strings.Contains(err.Error(), "the node's end of a host port is always the server") {
			t.Errorf("%s: HostSide = %+v, %v; want a refusal", c.name, h.Spec, err)
		}
	}
	for _, c := range []struct {
		name string
		edit func(*portspec.PortSpec)
	}{
		{"client", func(p *portspec.PortSpec) { p.Role = portspec.RoleClient }},
		{"zero-copy client", func(p *portspec.PortSpec) { p.Role, p.ZeroCopy = portspec.RoleClient, true }},
		{"zero-copy server", func(p *portspec.PortSpec) { p.ZeroCopy = true }},
	} {
		h, err := HostSide(pod, host)
		if err != nil {
			t.Fatal(err)
		}
		c.edit(&h.Spec)
		if f, err := Generate(h); err == nil || !strings.Contains(err.Error(), "always the server, in copy mode") {
			t.Errorf("Generate of a %s host side: %q, %v; want a refusal", c.name, f.DPDKArgs, err)
		}
	}
}
