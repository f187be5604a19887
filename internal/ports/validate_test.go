package ports

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestValidateFieldErrors checks that Validate names each bad field, once, and nothing else: the
// field path is what callers (the annotation's parser, the DRA driver) add their context to.
func TestValidateFieldErrors(t *testing.T) {
	ok := Port{Name: "east", Link: "chain-1"}
	for _, c := range []struct {
		name   string
		edit   func(*Port)
		fields []string
		msg    string // a part of the first error's message
	}{
		{"valid link", func(*Port) {}, nil, ""},
		{"valid host port", func(p *Port) { p.Link, p.Peer = "", "host" }, nil, ""},
		{"host port client", func(p *Port) { p.Link, p.Peer, p.Role = "", "host", "client" }, nil, ""},
		{"bad name", func(p *Port) { p.Name = "East_1" }, []string{"name"}, `"East_1" must be 1-15 characters`},
		{"long name", func(p *Port) { p.Name = "a234567890123456" }, []string{"name"}, "must be 1-15"},
		{"link and peer", func(p *Port) { p.Peer = "host" }, []string{"link"}, "set together with peer"},
		{"neither", func(p *Port) { p.Link = "" }, []string{"link"}, "missing"},
		{"bad peer", func(p *Port) { p.Link, p.Peer = "", "pod" }, []string{"peer"}, `"pod" must be "host"`},
		{"placeholder", func(p *Port) { p.Link = "c-{ordinal}" }, []string{"link"}, "unresolved"},
		{"bad link", func(p *Port) { p.Link = "Chain" }, []string{"link"}, "must be 1-"},
		{"bad role", func(p *Port) { p.Role = "master" }, []string{"role"}, `"master" must be server or client`},
		{"host server", func(p *Port) { p.Link, p.Peer, p.Role = "", "host", "server" }, []string{"role"}, "always the server of a host port"},
		{"bad mode", func(p *Port) { p.Mode = "tap" }, []string{"mode"}, `"tap" must be`},
		{"queues", func(p *Port) { p.Queues = 300 }, []string{"queues"}, "300 must be 1.."},
		{"ring not pow2", func(p *Port) { p.RingSize = 1000 }, []string{"ringSize"}, "1000 must be a power of two"},
		{"ring small", func(p *Port) { p.RingSize = 1 }, []string{"ringSize"}, "power of two"},
		{"buffer", func(p *Port) { p.BufferSize = 1 << 20 }, []string{"bufferSize"}, "1048576 must be"},
		{"all at once", func(p *Port) { p.Name, p.Role, p.Queues, p.BufferSize = "", "x", -1, 1<<20 },
			[]string{"name", "role", "queues", "bufferSize"}, "must be 1-15"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			c.edit(&p)
			p.Default()
			fes := p.Validate()
			var fields []string
			for _, fe := range fes {
				fields = append(fields, fe.Field)
				if want := `field "` + fe.Field + `": ` + fe.Msg; fe.Error() != want {
					t.Errorf("Error() = %q, want %q", fe.Error(), want)
				}
			}
			if !reflect.DeepEqual(fields, c.fields) {
				t.Fatalf("fields %q, want %q (%v)", fields, c.fields, fes)
			}
			if c.msg != "" && !strings.Contains(fes[0].Msg, c.msg) {
				t.Errorf("message %q lacks %q", fes[0].Msg, c.msg)
			}
		})
	}
}

// TestParseErrorIsTyped checks that the annotation's error carries the field errors unchanged
// under the annotation's name, so that a caller with its own field path needs no text surgery.
func TestParseErrorIsTyped(t *testing.T) {
	_, err := Parse(`[{"name":"a","link":"l","queues":999}]`)
	var ae *AnnotationError
	if !errors.As(err, &ae) {
		t.Fatalf("Parse error %T %v is no *AnnotationError", err, err)
	}
	if want := `port 0 (a): field "queues": 999 must be 1..`; !strings.HasPrefix(ae.Err.Error(), want) {
		t.Errorf("inner error %q, want prefix %q", ae.Err, want)
	}
	if !strings.HasPrefix(err.Error(), "annotation memifnet.io/ports: port 0 (a):") {
		t.Errorf("error %q lost the annotation's name", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "queues" {
		t.Errorf("errors.As FieldError: %v", fe)
	}
}
