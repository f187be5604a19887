package ports

import (
	"reflect"
	"slices"
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

// requestFields are the fields of a port request (Port, its Settings promoted), by Go name.
func requestFields(p Port) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	v := reflect.ValueOf(p)
	for _, f := range reflect.VisibleFields(v.Type()) {
		if !f.Anonymous {
			out[f.Name] = v.FieldByIndex(f.Index)
		}
	}
	return out
}

// specOnly are the fields of port.json that the request does not say: what the wiring decides
// (the socket, the secret, addresses from IPAM or a PortConfig), the version of the format, the
// MAC Spec derives, and the file it was read from.
var specOnly = []string{"Version", "Socket", "Secret", "MAC", "IPs", "File"}

// Spec carries every field of the request into port.json, and every field of port.json is the
// request's or one the wiring decides (specOnly): a field added to Port or PortSpec and forgotten
// in Spec fails this test, in either direction.
func TestSpecCarriesEveryField(t *testing.T) {
	p := Port{Name: "east", Link: "l", Peer: "host", Settings: Settings{Role: "client", Mode: portspec.ModeEthernet, ID: 7,
		Queues: 2, RingSize: 512, BufferSize: 4096, ZeroCopy: true}}
	spec := p.Spec(PodOwner("ns", "pod"))
	sv := reflect.ValueOf(spec)
	req := requestFields(p)
	for name, v := range req {
		if v.IsZero() {
			t.Fatalf("test port leaves field %s zero", name)
		}
		if f := sv.FieldByName(name); !f.IsValid() || !reflect.DeepEqual(f.Interface(), v.Interface()) {
			t.Errorf("Spec: field %s = %v, want %v", name, f, v)
		}
	}
	for _, f := range reflect.VisibleFields(sv.Type()) {
		if _, ok := req[f.Name]; !ok && !slices.Contains(specOnly, f.Name) {
			t.Errorf("port.json's field %s is neither a request's field nor one the wiring decides (specOnly)", f.Name)
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
