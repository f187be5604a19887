package dra

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// The opaque claim parameters the driver reads (docs/dra.md, "PortConfig").
const (
	ParamsAPIVersion = "memifnet.io/v1alpha1"
	ParamsKind       = "PortConfig"
)

// PortConfig is the opaque configuration of one or more requests of a claim: what the
// memifnet.io/ports annotation says about a port, said for a claim. It is untrusted input (anyone
// who may create a ResourceClaim writes it). Its settings are the port request's own
// (ports.Settings: the same fields, defaults and rules as the annotation's); what differs is
// deliberate: there is no "peer" (the claim's devices say link or host port), name and link have
// defaults from the claim, and a port's addresses are here (no IPAM under DRA). PortConfig.Port
// is the one conversion to a port request (docs/design.md, "Port object").
type PortConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name is the port's name in port.json (the interface name); default: the request name.
	Name string `json:"name,omitempty"`
	// Link names the link in port.json; default: the claim's name. Only for a claim with two
	// socket devices (the two ends of one link).
	Link string `json:"link,omitempty"`
	// Settings are the port's, as the annotation has them. The default role of a link's end:
	// the claim's first request serves, the second is the client; of a host port: client (the
	// host data plane serves).
	ports.Settings
	// IPs are an ip-mode port's addresses in CIDR notation (there is no IPAM under DRA): in
	// port.json, vpp.cli and port.env, and in the claim status's networkData.
	IPs []string `json:"ips,omitempty"`
}

// maxIPs is the most addresses a port may have: what networkData.ips holds.
const maxIPs = resourceapi.NetworkDeviceDataMaxIPs

// checkIPs validates a port's static addresses: mode ip only, at most maxIPs, each a prefix in
// the canonical form the API server demands of networkData.ips (192.0.2.5/24, 2001:db8::5/64),
// none twice.
func checkIPs(mode string, ips []string) error {
	if len(ips) == 0 {
		return nil
	}
	if mode != portspec.ModeIP {
		return fmt.Errorf("field \"ips\": set, but the port's mode is %s; addresses are for mode ip", mode)
	}
	if len(ips) > maxIPs {
		return fmt.Errorf("field \"ips\": %d addresses, at most %d", len(ips), maxIPs)
	}
	seen := map[string]bool{}
	for _, s := range ips {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil || p.Addr().Is4In6():
			return fmt.Errorf("field \"ips\": %q is not an address in CIDR notation (192.0.2.5/24, 2001:db8::5/64)", s)
		case p.String() != s:
			return fmt.Errorf("field \"ips\": %q, write it %q", s, p.String())
		case seen[s]:
			return fmt.Errorf("field \"ips\": %q twice", s)
		}
		seen[s] = true
	}
	return nil
}

// decodeConfig reads one opaque parameters object strictly: an unknown field, a wrong type or a
// wrong apiVersion/kind is an error naming the field.
func decodeConfig(raw []byte) (PortConfig, error) {
	var pc PortConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pc); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return pc, fmt.Errorf("field %q: got a JSON %s", ports.JSONField(te), te.Value)
		}
		return pc, errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if pc.APIVersion != ParamsAPIVersion {
		return pc, fmt.Errorf("field \"apiVersion\": %q, want %q", pc.APIVersion, ParamsAPIVersion)
	}
	if pc.Kind != ParamsKind {
		return pc, fmt.Errorf("field \"kind\": %q, want %q", pc.Kind, ParamsKind)
	}
	return pc, nil
}

// configs returns the PortConfig of each request of the claim that has one. A config without
// requests applies to every request; a later config overrides an earlier one (class configs come
// first, as the allocation lists them). Configs for other drivers are skipped.
func configs(driver string, alloc *resourceapi.AllocationResult, requests []string) (map[string]PortConfig, error) {
	out := map[string]PortConfig{}
	var errs []error
	for i, c := range alloc.Devices.Config {
		if c.Opaque == nil || c.Opaque.Driver != driver {
			continue
		}
		pc, err := decodeConfig(c.Opaque.Parameters.Raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("config[%d] (%s): %w", i, c.Source, err))
			continue
		}
		reqs := c.Requests
		if len(reqs) == 0 {
			reqs = requests
		}
		for _, r := range reqs {
			out[baseRequest(r)] = pc
		}
	}
	return out, errors.Join(errs...)
}

// baseRequest drops a subrequest name: "east/fast" -> "east".
func baseRequest(r string) string {
	base, _, _ := strings.Cut(r, "/")
	return base
}

// Port is the port request of a claim's request: the config's settings, the port named after the
// request unless the config names it, an end of link (the claim's link name, linkName) or, with
// link empty, a host port. Every field is validated, by the port request's own validator
// (ports.Port.Validate) where the annotation has the same field, so that both front ends refuse
// the same things with the same messages.
func (pc PortConfig) Port(request, link string) (ports.Port, error) {
	p := ports.Port{Name: cmp.Or(pc.Name, request), Link: link, Settings: pc.Settings}
	if link == "" {
		p.Peer = portspec.PeerHost
	}
	p.Default()
	var errs []error
	for _, fe := range p.Validate() {
		if fe.Field == "name" && p.Name == request {
			fe.Msg += " (the port name defaults to the request name; set \"name\" in the PortConfig)"
		}
		errs = append(errs, fe)
	}
	if len(errs) == 0 {
		errs = append(errs, checkIPs(p.Mode, pc.IPs))
	}
	return p, errors.Join(errs...)
}
