package peerconf

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// vppCheck reads a vpp.cli as VPP would, by the grammar VPP documents for the commands it uses:
//
//	create memif socket [id <id>] [filename <path>]
//	create interface memif [id <id>] [socket-id <socket-id>] [ring-size <size>] [buffer-size <size>]
//	    [hw-addr <mac-address>] <master|slave> [rx-queues <number>] [tx-queues <number>] [mode ip] [secret <string>]
//	set interface state <interface> up
//	set interface ip address <interface> <address>/<width>
//
// (VPP CLI reference, memif plugin, https://s3-docs.fd.io/vpp/24.10/cli-reference/clis/clicmd_src_plugins_memif.html;
// no-zero-copy and the limits below are src/plugins/memif/cli.c's: a socket id is neither 0 nor
// ~0, the ring size is a power of two up to 32768, 1..255 queues; unformat's %s is one word).
// It also checks what VPP would refuse at run time: an interface on a socket not created first,
// a socket id or interface created twice (so several files exec'd into one VPP clash), a command
// on an interface that was not created. state carries the sockets and interfaces across files.
type vppState struct {
	sockets    map[uint64]string // id -> filename
	interfaces map[string]vppIf
}

type vppIf struct {
	socket, id             uint64
	master, zeroCopy, ip   bool
	ring, buffer, rxq, txq uint64
	mac, secret, state     string
	addrs                  []string
}

func newVPPState() *vppState {
	return &vppState{sockets: map[uint64]string{}, interfaces: map[string]vppIf{}}
}

func (st *vppState) exec(file string) error {
	for i, line := range strings.Split(strings.TrimSuffix(file, "\n"), "\n") {
		if err := st.line(line); err != nil {
			return fmt.Errorf("line %d %q: %w", i+1, line, err)
		}
	}
	return nil
}

func (st *vppState) line(line string) error {
	w := strings.Fields(line)
	if strings.Join(w, " ") != line {
		return fmt.Errorf("not single-spaced words")
	}
	switch {
	case hasWords(w, "create", "memif", "socket"):
		return st.createSocket(w[3:])
	case hasWords(w, "create", "interface", "memif"):
		return st.createInterface(w[3:])
	case hasWords(w, "set", "interface", "state"):
		if len(w) != 5 || w[4] != "up" {
			return fmt.Errorf("want set interface state <if> up")
		}
		ifc, ok := st.interfaces[w[3]]
		if !ok {
			return fmt.Errorf("no interface %s", w[3])
		}
		ifc.state = "up"
		st.interfaces[w[3]] = ifc
		return nil
	case hasWords(w, "set", "interface", "ip", "address"):
		if len(w) != 6 {
			return fmt.Errorf("want set interface ip address <if> <prefix>")
		}
		ifc, ok := st.interfaces[w[4]]
		if !ok {
			return fmt.Errorf("no interface %s", w[4])
		}
		if _, err := netip.ParsePrefix(w[5]); err != nil {
			return err
		}
		ifc.addrs = append(ifc.addrs, w[5])
		st.interfaces[w[4]] = ifc
		return nil
	}
	return fmt.Errorf("not a command VPP documents")
}

func hasWords(w []string, want ...string) bool {
	return len(w) >= len(want) && strings.Join(w[:len(want)], " ") == strings.Join(want, " ")
}

func (st *vppState) createSocket(w []string) error {
	var id uint64
	var file string
	for len(w) > 0 {
		switch {
		case len(w) >= 2 && w[0] == "id":
			n, err := strconv.ParseUint(w[1], 10, 32)
			if err != nil || n == 0 || n == 1<<32-1 {
				return fmt.Errorf("Invalid socket id %q", w[1])
			}
			id = n
		case len(w) >= 2 && w[0] == "filename":
			file = w[1]
		default:
			return fmt.Errorf("unknown input %q", strings.Join(w, " "))
		}
		w = w[2:]
	}
	if id == 0 || file == "" {
		return fmt.Errorf("socket needs an id and a filename")
	}
	if _, dup := st.sockets[id]; dup {
		return fmt.Errorf("socket id %d already exists", id)
	}
	st.sockets[id] = file
	return nil
}

func (st *vppState) createInterface(w []string) error {
	ifc := vppIf{ring: 1024, buffer: 2048, rxq: 1, txq: 1, zeroCopy: true}
	roles := 0
	num := func(s string, bits int) (uint64, error) { return strconv.ParseUint(s, 10, bits) }
	for len(w) > 0 {
		var err error
		n := 2
		switch {
		case w[0] == "master" || w[0] == "slave":
			ifc.master, n = w[0] == "master", 1
			roles++
		case w[0] == "no-zero-copy":
			ifc.zeroCopy, n = false, 1
		case len(w) >= 2 && w[0] == "mode" && w[1] == "ip":
			ifc.ip = true
		case len(w) < 2:
			return fmt.Errorf("unknown input %q", w[0])
		case w[0] == "id":
			ifc.id, err = num(w[1], 32)
		case w[0] == "socket-id":
			ifc.socket, err = num(w[1], 32)
		case w[0] == "ring-size":
			ifc.ring, err = num(w[1], 32)
		case w[0] == "buffer-size":
			ifc.buffer, err = num(w[1], 16)
		case w[0] == "rx-queues":
			ifc.rxq, err = num(w[1], 32)
		case w[0] == "tx-queues":
			ifc.txq, err = num(w[1], 32)
		case w[0] == "secret":
			ifc.secret = w[1]
		case w[0] == "hw-addr":
			if _, err = net.ParseMAC(w[1]); err == nil {
				ifc.mac = w[1]
			}
		default:
			return fmt.Errorf("unknown input %q", strings.Join(w, " "))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w[0], err)
		}
		w = w[n:]
	}
	return st.addInterface(ifc, roles)
}

func (st *vppState) addInterface(ifc vppIf, roles int) error {
	switch {
	case roles != 1:
		return fmt.Errorf("want exactly one of master|slave, got %d", roles)
	case ifc.ring&(ifc.ring-1) != 0 || ifc.ring > 32768:
		return fmt.Errorf("ring size %d: a power of 2 up to 32768", ifc.ring)
	case ifc.rxq < 1 || ifc.rxq > 255 || ifc.txq < 1 || ifc.txq > 255:
		return fmt.Errorf("queues must be between 1 - 255")
	case len(ifc.secret) > 24:
		return fmt.Errorf("secret too long")
	}
	if _, ok := st.sockets[ifc.socket]; !ok {
		return fmt.Errorf("socket id %d was not created", ifc.socket)
	}
	name := fmt.Sprintf("memif%d/%d", ifc.socket, ifc.id)
	if _, dup := st.interfaces[name]; dup {
		return fmt.Errorf("interface %s already exists", name)
	}
	st.interfaces[name] = ifc
	return nil
}
