package portspec

import "testing"

func TestOpposite(t *testing.T) {
	for in, want := range map[string]string{RoleServer: RoleClient, RoleClient: RoleServer, "": "", "master": ""} {
		if got := Opposite(in); got != want {
			t.Errorf("Opposite(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPairRoles(t *testing.T) {
	for _, c := range []struct {
		a, b, wa, wb string
		ok           bool
	}{
		{"", "", RoleServer, RoleClient, true}, // first serves
		{RoleClient, "", RoleClient, RoleServer, true},
		{"", RoleClient, RoleServer, RoleClient, true},
		{"", RoleServer, RoleClient, RoleServer, true},
		{RoleServer, RoleClient, RoleServer, RoleClient, true},
		{RoleServer, RoleServer, RoleServer, RoleServer, false},
		{RoleClient, RoleClient, RoleClient, RoleClient, false},
	} {
		a, b, ok := PairRoles(c.a, c.b)
		if a != c.wa || b != c.wb || ok != c.ok {
			t.Errorf("PairRoles(%q, %q) = %q, %q, %v; want %q, %q, %v", c.a, c.b, a, b, ok, c.wa, c.wb, c.ok)
		}
	}
	if HostPodRole != RoleClient {
		t.Errorf("HostPodRole = %q: a host port's pod must be the client", HostPodRole)
	}
}
