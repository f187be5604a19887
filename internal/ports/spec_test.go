package ports

import (
	"reflect"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// The MACs are pinned: a pod or claim keeps its port's MAC across an upgrade of memif-cni or the
// node agent, so the derivation must never change. (Values from the functions before they moved
// here from memif-cni and the DRA driver.)
func TestStableMACPinned(t *testing.T) {
	for _, tc := range []struct {
		owner Owner
		port  string
		want  string
	}{
		{PodOwner("default", "pod-a"), "east", "46:74:7f:49:6e:b1"},
		{ClaimOwner("default", "pod-a"), "east", "62:38:e3:a0:44:fe"},
		{PodOwner("ns", "p"), "west", "5e:22:14:b0:d4:d5"},
	} {
		if got := stableMAC(tc.owner, tc.port).String(); got != tc.want {
			t.Errorf("stableMAC(%q, %q) = %s, want %s", tc.owner, tc.port, got, tc.want)
		}
	}
}

// Spec carries every field of the request into port.json: a field added to Port and forgotten
// here fails this test.
func TestSpecCarriesEveryField(t *testing.T) {
	p := Port{Name: "east", Link: "l", Peer: "host", Role: "client", Mode: portspec.ModeEthernet, ID: 7,
		Queues: 2, RingSize: 512, BufferSize: 4096, ZeroCopy: true}
	pv := reflect.ValueOf(p)
	for i := range pv.NumField() {
		if pv.Field(i).IsZero() {
			t.Fatalf("test port leaves field %s zero", pv.Type().Field(i).Name)
		}
	}
	spec := p.Spec(PodOwner("ns", "pod"))
	sv := reflect.ValueOf(spec)
	for i := range pv.NumField() {
		name := pv.Type().Field(i).Name
		f := sv.FieldByName(name)
		if !f.IsValid() || !reflect.DeepEqual(f.Interface(), pv.Field(i).Interface()) {
			t.Errorf("Spec: field %s = %v, want %v", name, f, pv.Field(i))
		}
	}
	if spec.Version != portspec.Version || spec.MAC != stableMAC(PodOwner("ns", "pod"), "east").String() {
		t.Errorf("Spec: version %q, MAC %q", spec.Version, spec.MAC)
	}
	for _, mode := range []string{portspec.ModeIP, portspec.ModePuntInject} {
		p.Mode = mode
		if mac := p.Spec(PodOwner("ns", "pod")).MAC; mac != "" {
			t.Errorf("Spec of a %s port has MAC %q", mode, mac)
		}
	}
}
