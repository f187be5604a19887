package ports

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	ps, err := Parse(`[{"name":"east","link":"chain-1","role":"client","id":4,"queues":2},{"name":"west","peer":"host","mode":"ip"}]`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Port{
		{Name: "east", Link: "chain-1", Settings: Settings{Role: "client", Mode: "ethernet", ID: 4, Queues: 2, RingSize: 1024, BufferSize: 2048}},
		{Name: "west", Peer: "host", Settings: Settings{Mode: "ip", Queues: 1, RingSize: 1024, BufferSize: 2048}},
	}
	if len(ps) != 2 || ps[0] != want[0] || ps[1] != want[1] {
		t.Fatalf("got %+v\nwant %+v", ps, want)
	}
	short, err := Parse(" east@chain-1, west ")
	if err != nil {
		t.Fatal(err)
	}
	want[0].Role, want[0].ID, want[0].Queues, want[1].Mode = "", 0, 1, "ethernet"
	if len(short) != 2 || short[0] != want[0] || short[1] != want[1] {
		t.Fatalf("short form: got %+v\nwant %+v", short, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, "empty"},
		{`[{"name":"east","link":"a","colour":"red"}]`, `port 0: unknown field "colour"`},
		{`[{"name":"east","link":"a","id":"x"}]`, `port 0: field "id": got a JSON string`},
		{`[{"name":"East","link":"a"}]`, `field "name"`},
		{`[{"name":"this-name-is-far-too-long","link":"a"}]`, `field "name"`},
		{`[{"name":"a","link":"x"},{"name":"a","link":"y"}]`, `port 1 (a): field "name": "a" is also the name of port 0`},
		{`[{"name":"a","link":"x"},{"name":"b","link":"x"}]`, `port 1 (b): field "link"`},
		{`[{"name":"a"}]`, `field "link": missing`},
		{`[{"name":"a","link":"x","peer":"host"}]`, `field "link": set together with peer`},
		{`[{"name":"a","peer":"vpp"}]`, `field "peer"`},
		{`[{"name":"a","link":"x","role":"master"}]`, `field "role"`},
		{`[{"name":"a","link":"x","mode":"tap"}]`, `field "mode"`},
		{`[{"name":"a","link":"x","ringSize":1000}]`, `field "ringSize"`},
		{`[{"name":"a","link":"x","queues":300}]`, `field "queues"`},
		{`[{"name":"a","link":"x","bufferSize":65536}]`, `field "bufferSize": 65536 must be 1..65535`},
		{`[{"name":"a","link":"x","bufferSize":-1}]`, `field "bufferSize"`},
		{`[{"name":"a","link":"../etc"}]`, `field "link"`},
		{`east@`, `link name after @ is empty`},
		{`[{"name":"a","link":"x"}`, `not a JSON list`},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s): %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// A pod never chooses the node's side of its host port (docs/security.md row 32): "role":
// "server" on a host port, which made the node's side a client (zero-copy with "zeroCopy"),
// is refused naming the field and saying why, in both forms of the annotation's objects; the
// pod may still be a client, zero-copy or not, and a link end may still serve.
func TestHostPortRole(t *testing.T) {
	for _, in := range []string{
		`[{"name":"up","peer":"host","role":"server"}]`,
		`[{"name":"up","peer":"host","role":"server","zeroCopy":true}]`,
		`[{"name":"east","link":"l"},{"name":"up","peer":"host","role":"server","mode":"ip"}]`,
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), `(up): field "role": "server" on a host port: the node's data plane is always the server`) {
			t.Errorf("Parse(%s): %v, want a refusal of field \"role\"", in, err)
		}
	}
	for _, in := range []string{
		`[{"name":"up","peer":"host","role":"client","zeroCopy":true}]`,
		`[{"name":"up","peer":"host","zeroCopy":true}]`,
		`[{"name":"east","link":"l","role":"server","zeroCopy":true}]`,
	} {
		if _, err := Parse(in); err != nil {
			t.Errorf("Parse(%s): %v", in, err)
		}
	}
}

// Buffer sizes below 64 are taken (DPDK and libmemif take them too); 0 means the default.
func TestParseBufferSizes(t *testing.T) {
	for in, want := range map[string]int{
		`[{"name":"a","link":"x","bufferSize":1}]`:     1,
		`[{"name":"a","link":"x","bufferSize":32}]`:    32,
		`[{"name":"a","link":"x","bufferSize":65535}]`: 65535,
		`[{"name":"a","link":"x","bufferSize":0}]`:     DefaultBufferSize,
	} {
		ps, err := Parse(in)
		if err != nil || ps[0].BufferSize != want {
			t.Errorf("Parse(%s): %+v, %v; want buffer size %d", in, ps, err, want)
		}
	}
}
