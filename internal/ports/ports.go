// Package ports parses the memifnet.io/ports pod annotation into validated port requests. Every
// problem is reported with the port and field it concerns, before the caller touches anything.
// It is the one parser of the annotation: memif-cni uses it at ADD, and an admission webhook or
// DRA driver can refuse the same bad annotations with the same messages. It also turns a request
// into its port.json (Port.Spec, with the port's stable MAC), for memif-cni and the DRA driver.
package ports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// Defaults of a port object (docs/design.md, "Port object"); the limits are portspec's.
const (
	DefaultMode       = portspec.ModeEthernet
	DefaultQueues     = 1
	DefaultRingSize   = 1024
	DefaultBufferSize = 2048
)

// Port is one port request with defaults filled in: the one model of a port request, whoever
// asks. Name, Link and Peer say which port and what it connects to; Settings say what it is
// like. The annotation's JSON object is this type; a DRA PortConfig embeds its Settings and
// says the rest its own way (the claim's devices decide link or host); port.json
// (portspec.PortSpec) is a different contract, the port as wired, made by Spec
// (docs/design.md, "Port object").
type Port struct {
	Name string `json:"name"`
	Link string `json:"link,omitempty"`
	Peer string `json:"peer,omitempty"`
	Settings
}

// Settings are the fields of a port request that every front end spells and checks the same
// way: the annotation's port object and a DRA PortConfig embed them, so that a setting added here
// is one both take, with the same JSON name, default (Default) and rules (Port.Validate).
type Settings struct {
	Role       string `json:"role,omitempty"` // "" means the plugin chooses; a host port's pod is the client
	Mode       string `json:"mode,omitempty"`
	ID         uint32 `json:"id,omitempty"`
	Queues     int    `json:"queues,omitempty"`
	RingSize   int    `json:"ringSize,omitempty"`
	BufferSize int    `json:"bufferSize,omitempty"`
	ZeroCopy   bool   `json:"zeroCopy,omitempty"`
}

// Parse reads the annotation: a JSON list of port objects, or the short form
// "east@chain-1,west" (name@link for a link port, a bare name for a host port). A link with a
// placeholder ({ordinal}) is refused: only ParseForPod, given the pod's labels, can resolve it.
func Parse(value string) ([]Port, error) { return parse(value, nil) }

// ParseForPod is Parse for one pod: each link's {ordinal} is first resolved from the pod's
// labels by names.ResolveLink, the one resolver, so that whoever resolves a pod's links pairs it
// the same way. A link the pod's labels cannot resolve is refused, naming the port and field.
func ParseForPod(value string, labels map[string]string) ([]Port, error) {
	ord, ok := labels[names.PodIndexLabel]
	return parse(value, func(link string) (string, error) { return names.ResolveLink(link, ord, ok) })
}

func parse(value string, resolve func(link string) (string, error)) ([]Port, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		return nil, fmt.Errorf("annotation %s is empty; remove it or list at least one port", names.PortsAnnotation)
	}
	var ps []Port
	var err error
	if strings.HasPrefix(v, "[") {
		ps, err = parseJSON(v)
	} else {
		ps, err = parseShort(v)
	}
	if err == nil && resolve != nil {
		err = resolveLinks(ps, resolve)
	}
	if err == nil {
		err = validate(ps)
	}
	if err != nil {
		return nil, &AnnotationError{Err: err}
	}
	return ps, nil
}

// AnnotationError is a bad memifnet.io/ports annotation; Err says what is wrong with it without
// naming the annotation, for a caller that names it its own way (the webhook's field path).
type AnnotationError struct{ Err error }

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s: %v", names.PortsAnnotation, e.Err)
}

func (e *AnnotationError) Unwrap() error { return e.Err }

func resolveLinks(ps []Port, resolve func(string) (string, error)) error {
	for i := range ps {
		l, err := resolve(ps[i].Link)
		if err != nil {
			return fmt.Errorf("port %d (%s): field %q: %w", i, ps[i].Name, "link", err)
		}
		ps[i].Link = l
	}
	return nil
}

func parseJSON(v string) ([]Port, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return nil, fmt.Errorf("not a JSON list of port objects: %w", err)
	}
	ps := make([]Port, len(raw))
	for i, r := range raw {
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ps[i]); err != nil {
			var te *json.UnmarshalTypeError
			switch {
			case errors.As(err, &te) && te.Field != "":
				return nil, fmt.Errorf("port %d: field %q: got a JSON %s, want %s", i, JSONField(te), te.Value, jsonKind(te.Type.Kind().String()))
			default:
				return nil, fmt.Errorf("port %d: %s", i, strings.TrimPrefix(err.Error(), "json: "))
			}
		}
	}
	return ps, nil
}

// JSONField is the JSON name of the field a decoding error is about. encoding/json names a
// field of an embedded struct by its Go path ("Settings.queues") though the JSON object is flat,
// and every port request's fields are one level deep: the name is the path's last element.
func JSONField(te *json.UnmarshalTypeError) string {
	return te.Field[strings.LastIndexByte(te.Field, '.')+1:]
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "a non-negative number"
	case goKind == "bool":
		return "true or false"
	case goKind == "string":
		return "a string"
	}
	return goKind
}

func parseShort(v string) ([]Port, error) {
	var ps []Port
	for i, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		name, link, isLink := strings.Cut(item, "@")
		p := Port{Name: name}
		if isLink {
			if link == "" {
				return nil, fmt.Errorf("port %d %q: link name after @ is empty", i, item)
			}
			p.Link = link
		} else {
			p.Peer = portspec.PeerHost
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// validate fills in each port's defaults and checks it (Port.Validate) and the list: names and
// links unique. Every problem names its port and field.
func validate(ps []Port) error {
	var errs []error
	portAt := map[string]int{}
	links := map[string]int{}
	for i := range ps {
		p := &ps[i]
		p.Default()
		fes := p.Validate()
		// The list's own checks, placed where a reader of the field's errors expects them: a
		// duplicate name first, a duplicate link after the name (each only of a valid value).
		if portspec.IsPortName(p.Name) {
			if j, dup := portAt[p.Name]; dup {
				fes = slices.Insert(fes, 0, fieldErr("name", "%q is also the name of port %d", p.Name, j))
			} else {
				portAt[p.Name] = i
			}
		}
		if p.Link != "" && !hasField(fes, "link", "peer") {
			if j, dup := links[p.Link]; dup {
				at := 0
				if hasField(fes, "name") {
					at = 1 // after the name's one error
				}
				fes = slices.Insert(fes, at, fieldErr("link", "%q is also used by port %d; both ends of a link in one pod need no link", p.Link, j))
			}
			links[p.Link] = i
		}
		for _, fe := range fes {
			errs = append(errs, fmt.Errorf("port %d (%s): %w", i, p.Name, fe))
		}
	}
	return errors.Join(errs...)
}

func hasField(fes []*FieldError, fields ...string) bool {
	for _, fe := range fes {
		if slices.Contains(fields, fe.Field) {
			return true
		}
	}
	return false
}
