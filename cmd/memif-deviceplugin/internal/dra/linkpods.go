package dra

import "github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/portmetrics"

// Ports lists the socket ports of the prepared claims, for the per-port metrics. Pod is left
// empty: a claim names its consumers but not which pod uses which of its devices; the kubelet's
// PodResources API does (podresources.Client.DRAPods).
func (d *Driver) Ports() []portmetrics.Port {
	var out []portmetrics.Port
	for _, c := range d.state.Prepared() {
		for _, dev := range c.Devices {
			if dev.Kind != KindSocket || dev.Status == nil || !c.Prepared {
				continue
			}
			out = append(out, portmetrics.Port{Namespace: c.Namespace, Port: dev.Status.Port, Link: dev.Status.Link, Claim: c.Name, Slot: dev.Name})
		}
	}
	return out
}
