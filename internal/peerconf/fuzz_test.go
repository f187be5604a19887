package peerconf

import (
	"strings"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// FuzzGenerate: for any valid spec, whatever its socket path, secret and slot name, every file
// is what its reader takes: dpdk.args one line of known device arguments whose values are the
// spec's, vpp.cli only commands VPP documents (vppCheck) creating exactly this port, port.env
// read back to the spec's values. Only a control character may make Generate fail.
func FuzzGenerate(f *testing.F) {
	f.Add("/run/memifnet/slot-007/link/memif.sock", "0123456789abcdef", "slot-007", uint32(0), uint8(0), uint8(10), uint16(2048), uint8(1), true, false)
	f.Add("/run/a b,c=d", "x y\nexec /z", "dra-slot-1", uint32(7), uint8(1), uint8(15), uint16(1), uint8(255), false, true)
	f.Add("/run/'q'", "$(id)", "weird name", uint32(1<<32-1), uint8(2), uint8(1), uint16(65535), uint8(2), true, true)
	f.Fuzz(func(t *testing.T, socket, secret, slot string, id uint32, mode, log2Ring uint8, bsize uint16, queues uint8, server, zeroCopy bool) {
		p := portspec.PortSpec{
			Version: portspec.Version, Name: "p0", Role: portspec.RoleClient, ID: id, Socket: socket, Secret: secret,
			Mode:   []string{portspec.ModeEthernet, portspec.ModeIP, portspec.ModePuntInject}[mode%3],
			Queues: int(queues), RingSize: 1 << (1 + log2Ring%15), BufferSize: int(bsize), ZeroCopy: zeroCopy, Link: "l",
		}
		if server {
			p.Role = portspec.RoleServer
		}
		if p.Mode == portspec.ModeEthernet {
			p.MAC = "02:00:00:00:00:01"
		}
		if p.Validate() != nil {
			return
		}
		files, err := Generate(Side{Spec: p, Slot: slot})
		if err != nil {
			if !hasControl(socket + secret + slot) {
				t.Fatalf("Generate failed without a control character: %v", err)
			}
			return
		}
		if files.DPDKArgs != "" {
			checkDPDKArgs(t, files.DPDKArgs, p)
		}
		if files.VPPCLI != "" {
			st := newVPPState()
			if err := st.exec(files.VPPCLI); err != nil {
				t.Fatalf("vpp.cli: %v\n%s", err, files.VPPCLI)
			}
			if len(st.interfaces) != 1 || st.sockets[uint64(Number(slot))] != socket {
				t.Fatalf("vpp.cli makes %v on %v", st.interfaces, st.sockets)
			}
		}
		env, err := readEnv(files.Env)
		if err != nil {
			t.Fatalf("port.env: %v\n%s", err, files.Env)
		}
		if env["MEMIF_SOCKET"] != socket || env["MEMIF_SECRET"] != secret || env["MEMIF_ROLE"] != p.Role {
			t.Fatalf("port.env reads back socket %q secret %q role %q", env["MEMIF_SOCKET"], env["MEMIF_SECRET"], env["MEMIF_ROLE"])
		}
		fuzzHostSide(t, p, slot)
	})
}

// fuzzHostSide: the same port as a host port. Its host side is the server in copy mode whatever
// the pod's end asked (a serving pod end gets none), and every file is what its reader takes.
func fuzzHostSide(t *testing.T, p portspec.PortSpec, slot string) {
	p.Link, p.Peer = "", portspec.PeerHost
	h, err := HostSide(p, Host{Socket: p.Socket, Slot: slot, Pod: "ns/pod"})
	if p.Role != portspec.RoleClient {
		if err == nil {
			t.Fatalf("HostSide of a serving pod end: %+v", h.Spec)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(h)
	if err != nil {
		if !hasControl(p.Socket + p.Secret + slot) {
			t.Fatalf("Generate of the host side failed without a control character: %v", err)
		}
		return
	}
	if files.DPDKArgs != "" {
		checkDPDKArgs(t, files.DPDKArgs, h.Spec)
		if !strings.Contains(files.DPDKArgs, ",role=server,") || !strings.Contains(files.DPDKArgs, ",zero-copy=no") {
			t.Fatalf("host dpdk.args %q: want a copy-mode server", files.DPDKArgs)
		}
	}
	if files.VPPCLI != "" {
		st := newVPPState()
		if err := st.exec(files.VPPCLI); err != nil {
			t.Fatalf("host vpp.cli: %v\n%s", err, files.VPPCLI)
		}
		for _, ifc := range st.interfaces {
			if !ifc.master {
				t.Fatalf("host vpp.cli makes a slave: %+v\n%s", ifc, files.VPPCLI)
			}
		}
	}
}

// checkDPDKArgs splits dpdk.args as EAL and rte_kvargs would and compares every value.
func checkDPDKArgs(t *testing.T, args string, p portspec.PortSpec) {
	t.Helper()
	words := strings.Fields(args)
	if strings.Count(args, "\n") != 1 || !strings.HasSuffix(args, "\n") || len(words) < 1 || len(words) > 2 {
		t.Fatalf("dpdk.args is not one line of one or two arguments: %q", args)
	}
	dev, list, _ := strings.Cut(strings.TrimPrefix(words[0], "--vdev="), ",")
	if !strings.HasPrefix(dev, "net_memif") {
		t.Fatalf("device %q", dev)
	}
	kv := map[string]string{}
	for _, item := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(item, "=")
		if !ok || strings.Contains(v, "=") || kv[k] != "" {
			t.Fatalf("device argument %q of %q", item, args)
		}
		switch k {
		case "role", "id", "socket", "socket-abstract", "rsize", "bsize", "secret", "zero-copy", "mac":
		default:
			t.Fatalf("unknown net_memif argument %q", k)
		}
		kv[k] = v
	}
	if kv["socket"] != p.Socket || kv["secret"] != p.Secret || kv["role"] != p.Role || kv["socket-abstract"] != "no" {
		t.Fatalf("dpdk.args %q for spec %+v", args, p)
	}
	if zc := kv["zero-copy"] == "yes"; zc != (len(words) == 2 && words[1] == "--single-file-segments") {
		t.Fatalf("zero-copy without --single-file-segments or the reverse: %q", args)
	}
}
