package ports

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// annotationCases are memifnet.io/ports values: every field set, both forms, and a bad value
// of each kind a user or a hostile pod writes.
var annotationCases = []string{
	`[{"name":"east","link":"chain-1","role":"client","mode":"ip","id":4,"queues":2,"ringSize":512,"bufferSize":4096,"zeroCopy":true}]`,
	`[{"name":"up","peer":"host"},{"name":"west","link":"l","role":"server","mode":"punt-inject"}]`,
	`[{"name":"a","link":"x","bufferSize":0,"queues":0,"ringSize":0,"id":0,"zeroCopy":false,"role":"","mode":""}]`,
	` east@chain-1, west `,
	`east@chain-{ordinal}`,
	``,
	`east@`,
	`[{"name":"a","link":"x"}`,
	`{"name":"a","link":"x"}`,
	`[{"name":"east","link":"a","colour":"red"}]`,
	`[{"name":"east","link":"a","id":"x"}]`,
	`[{"name":"east","link":"a","id":-1}]`,
	`[{"name":"east","link":"a","queues":"2"}]`,
	`[{"name":"east","link":"a","zeroCopy":"yes"}]`,
	`[{"name":7,"link":"a"}]`,
	`[{"name":"East","link":"a"}]`,
	`[{"name":"this-name-is-far-too-long","link":"a"}]`,
	`[{"name":"a","link":"x"},{"name":"a","link":"y"}]`,
	`[{"name":"a","link":"x"},{"name":"b","link":"x"}]`,
	`[{"name":"a"}]`,
	`[{"name":"a","link":"x","peer":"host"}]`,
	`[{"name":"a","peer":"vpp"}]`,
	`[{"name":"up","peer":"host","role":"server"}]`,
	`[{"name":"a","link":"x","role":"master","mode":"tap","ringSize":1000,"queues":300,"bufferSize":65536}]`,
	`[{"name":"a","link":"../etc"}]`,
}

// TestGoldenAnnotation pins the annotation's wire format: what each value parses to, written
// back as the webhook writes a pinned annotation (json.Marshal of the ports), or the error.
func TestGoldenAnnotation(t *testing.T) {
	var b strings.Builder
	for _, in := range annotationCases {
		fmt.Fprintf(&b, "in:  %s\n", in)
		ps, err := Parse(in)
		if err != nil {
			fmt.Fprintf(&b, "err: %v\n\n", err)
			continue
		}
		out, err := json.Marshal(ps)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "out: %s\n\n", out)
		// What the webhook writes back reads as the same ports.
		again, err := Parse(string(out))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(ps) {
			t.Errorf("Parse(%s) = %+v, %v; want %+v", out, again, err, ps)
		}
	}
	ps, err := ParseForPod(`[{"name":"east","link":"chain-{ordinal}"}]`, map[string]string{"apps.kubernetes.io/pod-index": "3"})
	out, _ := json.Marshal(ps)
	fmt.Fprintf(&b, "for pod-index 3: %s %v\n", out, err)
	testutil.Golden(t, "testdata/annotation.golden", []byte(b.String()))
}

// TestGoldenPortJSON pins port.json as memif-cni and the DRA driver write it (slotwire's
// json.MarshalIndent) for the request's part of it: Spec of a link port and a host port.
func TestGoldenPortJSON(t *testing.T) {
	ps, err := Parse(`[{"name":"east","link":"chain-1","role":"client","id":4,"queues":2,"zeroCopy":true},{"name":"up","peer":"host","mode":"ip"}]`)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i, p := range ps {
		spec := p.Spec(PodOwner("ns", "pod"))
		if i == 0 {
			spec.Socket, spec.Secret = "/run/memifnet/slot-000/link/memif.sock", "00112233445566778899aa"
		} else {
			spec.Role, spec.Socket, spec.IPs = "client", "/run/memifnet/slot-001/memif.sock", []string{"192.0.2.5/24"}
		}
		out, err := json.MarshalIndent(spec, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		// An app reads it back as it was written (portspec.Parse, as Discover does).
		if back, err := portspec.Parse(out); err != nil || !reflect.DeepEqual(back, spec) {
			t.Errorf("portspec.Parse(%s) = %+v, %v; want %+v", out, back, err, spec)
		}
		b.Write(append(out, '\n'))
	}
	testutil.Golden(t, "testdata/port-json.golden", []byte(b.String()))
}

// FuzzParse: an accepted annotation is valid port by port, and what the webhook writes back when
// it pins one (json.Marshal of the ports) parses to the same ports.
func FuzzParse(f *testing.F) {
	for _, in := range annotationCases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, ann string) {
		ps, err := Parse(ann)
		if err != nil {
			return
		}
		for _, p := range ps {
			if fes := p.Validate(); len(fes) > 0 {
				t.Fatalf("Parse(%q) accepted %+v: %v", ann, p, fes)
			}
		}
		out, err := json.Marshal(ps)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(string(out))
		if err != nil || !reflect.DeepEqual(again, ps) {
			t.Fatalf("Parse(%q) = %+v; written back as %s it parses to %+v, %v", ann, ps, out, again, err)
		}
	})
}
