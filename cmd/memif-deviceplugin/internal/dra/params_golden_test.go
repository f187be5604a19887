package dra

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// portConfigCases are opaque parameters of a claim: every field set, the defaults, and a bad
// value of each kind anyone who may create a ResourceClaim can write.
var portConfigCases = []string{
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig"}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","name":"east","link":"chain-1","role":"client","mode":"ip","id":4,"queues":2,"ringSize":512,"bufferSize":4096,"zeroCopy":true,"ips":["192.0.2.1/24","2001:db8::1/64"]}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","role":"server","zeroCopy":true}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","name":"","queues":0,"ringSize":0,"bufferSize":0,"id":0,"zeroCopy":false,"role":"","mode":""}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"Port"}`,
	`{"apiVersion":"memifnet.io/v1","kind":"PortConfig"}`,
	`{"kind":"PortConfig"}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","queus":2}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","peer":"host"}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","queues":"2"}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","id":-1}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","zeroCopy":"yes"}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","name":7}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","ips":"192.0.2.1/24"}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","name":"Bad_Name","role":"master","mode":"tap","queues":300,"ringSize":1000,"bufferSize":65536}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","link":"../etc"}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","ips":["192.0.2.1/24"]}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","mode":"ip","ips":["192.0.2.1/24","192.0.2.1/24"]}`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig","mode":"ip","ips":["192.0.2.01/24"]}`,
	`[]`,
	`{"apiVersion":"memifnet.io/v1alpha1","kind":"PortConfig"} {}`,
}

// TestGoldenPortConfig pins the DRA opaque parameters' wire format: what each decodes to (written
// back as JSON), and the port it makes for request "east" as a host port and as an end of a link
// (of claim claim-1), or the error.
func TestGoldenPortConfig(t *testing.T) {
	var b strings.Builder
	for _, in := range portConfigCases {
		fmt.Fprintf(&b, "in:   %s\n", in)
		pc, err := decodeConfig([]byte(in))
		if err != nil {
			fmt.Fprintf(&b, "err:  %v\n\n", err)
			continue
		}
		out, err := json.Marshal(pc)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "out:  %s\n", out)
		// A host port's claim; a link's, whose name is the "link" parameter or the claim's
		// (linkName).
		for _, link := range []string{"", cmp.Or(pc.Link, "claim-1")} {
			p, err := pc.Port("east", link)
			out, _ := json.Marshal(p)
			fmt.Fprintf(&b, "link %q: %s\n  err: %v\n", link, out, err)
		}
		b.WriteString("\n")
	}
	testutil.Golden(t, "testdata/portconfig.golden", []byte(b.String()))
}

// PortConfig.Port carries every field of the config into the port request, and every field of
// the request comes from the config or from the claim (Peer: a claim with one socket device is a
// host port): a field added to ports.Port or PortConfig and forgotten in the conversion fails
// this test, in either direction. The config's own fields are its header and the addresses,
// which the driver writes into port.json and the claim's status itself.
func TestPortConfigCarriesEveryField(t *testing.T) {
	pc := PortConfig{APIVersion: ParamsAPIVersion, Kind: ParamsKind, Name: "east", Link: "l",
		Settings: ports.Settings{Role: "client", Mode: "ip", ID: 7, Queues: 2, RingSize: 512, BufferSize: 4096, ZeroCopy: true},
		IPs:      []string{"192.0.2.1/24"}}
	configOnly := []string{"APIVersion", "Kind", "IPs"}
	fromClaim := []string{"Peer"}
	p, err := pc.Port("request", pc.Link)
	if err != nil {
		t.Fatal(err)
	}
	cv, pv := reflect.ValueOf(pc), reflect.ValueOf(p)
	for _, f := range reflect.VisibleFields(cv.Type()) {
		v := cv.FieldByIndex(f.Index)
		switch {
		case f.Anonymous:
		case v.IsZero():
			t.Fatalf("test config leaves field %s zero", f.Name)
		case slices.Contains(configOnly, f.Name):
		default:
			if got := pv.FieldByName(f.Name); !got.IsValid() || !reflect.DeepEqual(got.Interface(), v.Interface()) {
				t.Errorf("PortConfig.Port: field %s = %v, want %v", f.Name, got, v)
			}
		}
	}
	for _, f := range reflect.VisibleFields(pv.Type()) {
		if _, ok := cv.Type().FieldByName(f.Name); !ok && !slices.Contains(fromClaim, f.Name) {
			t.Errorf("the port request's field %s is neither in PortConfig nor decided by the claim (fromClaim)", f.Name)
		}
	}
	if host, err := pc.Port("request", ""); err != nil || host.Peer != portspec.PeerHost || host.Link != "" {
		t.Errorf("PortConfig.Port for a host port: %+v, %v", host, err)
	}
}

// FuzzPortConfig: whatever the parameters, decoding and the conversion return an error or a
// valid port; an accepted config encodes back to parameters that decode to the same config.
func FuzzPortConfig(f *testing.F) {
	for _, in := range portConfigCases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		pc, err := decodeConfig([]byte(raw))
		if err != nil {
			return
		}
		for _, link := range []string{"", cmp.Or(pc.Link, "claim-1")} {
			if p, err := pc.Port("east", link); err == nil && len(p.Validate()) > 0 {
				t.Fatalf("PortConfig.Port(%s) accepted %+v: %v", raw, p, p.Validate())
			}
		}
		out, err := json.Marshal(pc)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeConfig(out)
		if err != nil {
			t.Fatalf("decodeConfig(%s) = %+v; encoded as %s it is refused: %v", raw, pc, out, err)
		}
		if out2, _ := json.Marshal(again); !bytes.Equal(out2, out) {
			t.Fatalf("decodeConfig(%s) = %+v; encoded as %s it decodes to %+v (%s)", raw, pc, out, again, out2)
		}
	})
}
