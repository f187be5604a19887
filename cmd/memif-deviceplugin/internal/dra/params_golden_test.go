package dra

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/testutil"
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
			p, err := port("east", pc, link)
			if err == nil {
				err = checkIPs(p.Mode, pc.IPs)
			}
			out, _ := json.Marshal(p)
			fmt.Fprintf(&b, "link %q: %s\n  err: %v\n", link, out, err)
		}
		b.WriteString("\n")
	}
	testutil.Golden(t, "testdata/portconfig.golden", []byte(b.String()))
}
