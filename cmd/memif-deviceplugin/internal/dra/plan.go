package dra

import (
	"errors"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// plan checks the claim's allocation and parameters and returns what Prepare will do: the
// claim's devices on this node, and the port of each socket device (by device name).
func (d *DeviceState) plan(claim *resourceapi.ResourceClaim) (PreparedClaim, map[string]ports.Port, error) {
	plan, sockets, err := d.allocated(claim)
	if err != nil {
		return plan, nil, err
	}
	var requests []string
	for _, r := range claim.Spec.Devices.Requests {
		requests = append(requests, r.Name)
	}
	cfgs, err := configs(d.opts.DriverName, claim.Status.Allocation, requests)
	if err != nil {
		return plan, nil, err
	}
	link, err := linkName(claim.Name, plan, sockets, cfgs)
	if err != nil {
		return plan, nil, err
	}
	if link != "" {
		plan.LinkDir = plan.UID
	}
	out, err := socketPorts(plan, sockets, cfgs, link)
	if err != nil {
		return plan, nil, err
	}
	if link != "" {
		if err := linkEnds(plan, sockets, requests, out); err != nil {
			return plan, nil, err
		}
	}
	d.statuses(&plan, sockets, out, cfgs, link)
	return plan, out, nil
}

// allocated lists the claim's devices on this node (sockets are the indexes of the socket
// devices), refusing one that is not the driver's or that another prepared claim holds.
func (d *DeviceState) allocated(claim *resourceapi.ResourceClaim) (PreparedClaim, []int, error) {
	plan := PreparedClaim{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	var sockets []int
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.opts.DriverName || r.Pool != d.opts.NodeName {
			continue
		}
		dev := PreparedDevice{Request: baseRequest(r.Request), Pool: r.Pool, Name: r.Device}
		switch {
		case d.hasSlot(r.Device):
			dev.Kind = KindSocket
			sockets = append(sockets, len(plan.Devices))
		case d.units[r.Device] != nil:
			dev.Kind = KindHugepage
		default:
			return plan, nil, fmt.Errorf("allocated device %q (request %s) is not a device of this node's driver", r.Device, r.Request)
		}
		for _, other := range d.claims {
			for _, od := range other.Devices {
				if od.Name == r.Device && other.UID != plan.UID {
					return plan, nil, fmt.Errorf("device %s is held by claim %s/%s (%s); refusing to hand it out twice", r.Device, other.Namespace, other.Name, other.UID)
				}
			}
		}
		plan.Devices = append(plan.Devices, dev)
	}
	return plan, sockets, nil
}

// linkName is the link's name when the claim is a link (two socket devices, one per request:
// the claim's name, or the "link" parameter), empty for a host port or no socket at all.
func linkName(claimName string, plan PreparedClaim, sockets []int, cfgs map[string]PortConfig) (string, error) {
	switch len(sockets) {
	case 0, 1:
		return "", nil
	case 2:
	default:
		return "", fmt.Errorf("%d socket devices on one claim: a claim is one link (two socket devices, one per request) or one host port", len(sockets))
	}
	if a, b := plan.Devices[sockets[0]].Request, plan.Devices[sockets[1]].Request; a == b {
		return "", fmt.Errorf("request %s got both socket devices of the link; a link claim has one request per end", a)
	}
	link := claimName
	for _, i := range sockets {
		if l := cfgs[plan.Devices[i].Request].Link; l != "" {
			link = l
		}
	}
	return link, nil
}

// socketPorts validates each socket device's parameters into its port, all errors together.
func socketPorts(plan PreparedClaim, sockets []int, cfgs map[string]PortConfig, link string) (map[string]ports.Port, error) {
	out := map[string]ports.Port{}
	var errs []error
	for _, i := range sockets {
		dev := plan.Devices[i]
		pc := cfgs[dev.Request]
		if pc.Link != "" && link == "" {
			errs = append(errs, fmt.Errorf("request %s: field \"link\": set, but the claim has one socket device (a host port); a link claim has two requests", dev.Request))
			continue
		}
		p, err := pc.Port(dev.Request, link)
		if err != nil {
			errs = append(errs, fmt.Errorf("request %s: %w", dev.Request, err))
			continue
		}
		out[dev.Name] = p
	}
	return out, errors.Join(errs...)
}

// linkEnds gives a link's two ends their roles and checks that they fit together.
func linkEnds(plan PreparedClaim, sockets []int, requests []string, out map[string]ports.Port) error {
	if err := roles(plan, sockets, requests, out); err != nil {
		return err
	}
	ra, rb := plan.Devices[sockets[0]].Request, plan.Devices[sockets[1]].Request
	a, b := out[plan.Devices[sockets[0]].Name], out[plan.Devices[sockets[1]].Name]
	if a.Name == b.Name {
		// Both ends in one pod would be ambiguous; in two pods the names may well match,
		// but then port.json is all the app has to tell them apart by: keep them distinct.
		return fmt.Errorf("requests %s and %s: field \"name\": both ports are named %q", ra, rb, a.Name)
	}
	if a.Mode != b.Mode || a.ID != b.ID {
		return fmt.Errorf("requests %s and %s disagree on \"mode\" (%s, %s) or \"id\" (%d, %d); the two ends of a link must match",
			ra, rb, a.Mode, b.Mode, a.ID, b.ID)
	}
	return nil
}

// statuses records each socket device's port status and network data (with the request's
// addresses); a host port's end is the client (the host data plane listens on the slot's socket).
func (d *DeviceState) statuses(plan *PreparedClaim, sockets []int, out map[string]ports.Port, cfgs map[string]PortConfig, link string) {
	for _, i := range sockets {
		name := plan.Devices[i].Name
		p := out[name]
		if p.Role == "" {
			p.Role = portspec.HostPodRole
			out[name] = p
		}
		st := &PortStatus{Port: p.Name, Role: p.Role, Link: p.Link}
		st.Socket = names.ContainerDir + "/" + name + "/" + names.SocketFile
		if link != "" {
			st.Socket = names.ContainerDir + "/" + name + "/" + names.LinkSubdir + "/" + names.SocketFile
		} else {
			st.HostSocket = d.opts.Slots.Dir(name) + "/" + names.SocketFile
		}
		plan.Devices[i].Status = st
		spec := p.Spec(ports.ClaimOwner(plan.Namespace, plan.Name))
		spec.IPs = cfgs[plan.Devices[i].Request].IPs
		plan.Devices[i].Network = networkData(spec)
	}
}

// networkData is a port's standard network data: the port's name is its interface name, an
// ethernet port's MAC its hardware address, an ip-mode port's addresses its IPs (as port.json
// has them).
func networkData(spec portspec.PortSpec) *resourceapi.NetworkDeviceData {
	return &resourceapi.NetworkDeviceData{InterfaceName: spec.Name, HardwareAddress: spec.MAC, IPs: spec.IPs}
}

// roles fills in the roles of a link's two ends (portspec.PairRoles): set ones must differ; an
// unset one is the opposite of the other; with neither set, the request listed first in the
// claim serves.
func roles(plan PreparedClaim, sockets []int, requests []string, out map[string]ports.Port) error {
	a, b := plan.Devices[sockets[0]], plan.Devices[sockets[1]]
	pa, pb := out[a.Name], out[b.Name]
	var ok bool
	if slices.Index(requests, a.Request) <= slices.Index(requests, b.Request) {
		pa.Role, pb.Role, ok = portspec.PairRoles(pa.Role, pb.Role)
	} else {
		pb.Role, pa.Role, ok = portspec.PairRoles(pb.Role, pa.Role)
	}
	if !ok {
		return fmt.Errorf("requests %s and %s: field \"role\": both are %s; one end of a link serves, the other is the client", a.Request, b.Request, pa.Role)
	}
	out[a.Name], out[b.Name] = pa, pb
	return nil
}

func (d *DeviceState) hasSlot(name string) bool { _, ok := d.slots[name]; return ok }
