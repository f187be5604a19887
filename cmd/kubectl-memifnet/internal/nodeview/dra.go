package nodeview

import (
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/cmd/internal/draattr"
	"github.com/memifnet/memifnet/internal/names"
)

// dra fills in the DRA devices of the node: the driver's slices whose pool is the node (the
// newest generation only), which claims hold them, and their taints.
func (rep *Report) dra(node string, slices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim) {
	var gen int64 = -1
	for _, s := range slices {
		if s.Spec.Driver == names.DRADriver && s.Spec.Pool.Name == node {
			gen = max(gen, s.Spec.Pool.Generation)
		}
	}
	held := map[string]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == names.DRADriver && r.Pool == node {
				held[r.Device] = c.Namespace + "/" + c.Name
			}
		}
	}
	groups := map[[2]string]*DRAGroup{}
	for _, s := range slices {
		if s.Spec.Driver != names.DRADriver || s.Spec.Pool.Name != node || s.Spec.Pool.Generation != gen {
			continue
		}
		for _, d := range s.Spec.Devices {
			dev := Device{Name: d.Name, Claim: held[d.Name]}
			if a, ok := d.Attributes[draattr.Type]; ok && a.StringValue != nil {
				dev.Type = *a.StringValue
			}
			if a, ok := d.Attributes[draattr.Pool]; ok && a.StringValue != nil {
				dev.Pool = *a.StringValue
			}
			for _, t := range d.Taints {
				dev.Taints = append(dev.Taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
			}
			k := [2]string{dev.Type, dev.Pool}
			g := groups[k]
			if g == nil {
				g = &DRAGroup{Type: dev.Type, Pool: dev.Pool}
				groups[k] = g
			}
			g.Total++
			switch {
			case dev.Claim != "":
				g.Used++
			case len(dev.Taints) > 0:
				g.Tainted++
			default:
				g.Free++
			}
			if len(dev.Taints) > 0 {
				rep.Unhealthy = append(rep.Unhealthy, fmt.Sprintf("DRA device %s: tainted %v", dev.Name, dev.Taints))
			}
			rep.Devices = append(rep.Devices, dev)
		}
	}
	for _, g := range groups {
		rep.DRA = append(rep.DRA, *g)
	}
	sort.Slice(rep.DRA, func(i, j int) bool { return rep.DRA[i].Type+rep.DRA[i].Pool < rep.DRA[j].Type+rep.DRA[j].Pool })
	sort.Slice(rep.Devices, func(i, j int) bool { return rep.Devices[i].Name < rep.Devices[j].Name })
}
