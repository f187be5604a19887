package draattr

import (
	"encoding/json"
	"testing"
)

// The status data's format is what users read with kubectl (docs/dra.md: {port, role, socket,
// link}, a host port's hostSocket) and what kubectl-memifnet parses: pinned here. Data written
// by an older agent, which named the port "name", still reads.
func TestPortStatusFormat(t *testing.T) {
	for _, c := range []struct {
		st   PortStatus
		want string
	}{
		{PortStatus{Port: "east", Role: "server", Socket: "/run/memifnet/dra-slot-000/link/memif.sock", Link: "l"},
			`{"port":"east","role":"server","socket":"/run/memifnet/dra-slot-000/link/memif.sock","link":"l"}`},
		{PortStatus{Port: "up", Role: "client", Socket: "/run/memifnet/dra-slot-001/memif.sock", HostSocket: "/var/lib/memifnet/sockets/dra-slot-001/memif.sock"},
			`{"port":"up","role":"client","socket":"/run/memifnet/dra-slot-001/memif.sock","hostSocket":"/var/lib/memifnet/sockets/dra-slot-001/memif.sock"}`},
	} {
		b, err := json.Marshal(c.st)
		if err != nil || string(b) != c.want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", c.st, b, err, c.want)
		}
		var back PortStatus
		if err := json.Unmarshal(b, &back); err != nil || back != c.st {
			t.Errorf("json.Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
	var old PortStatus
	if err := json.Unmarshal([]byte(`{"name":"east","role":"client","socket":"/s"}`), &old); err != nil || old.Port != "east" {
		t.Errorf("an older agent's data: %+v, %v; want port east", old, err)
	}
}
