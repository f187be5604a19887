package daemon

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/podresources"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/portmetrics"
	"github.com/memifnet/memifnet/internal/names"
)

// PortCollector is the per-port metrics of the node's pods: the device plugin's ports from
// memif-cni's records, the DRA driver's from its prepared claims with each device's pod from
// the kubelet's PodResources API.
func (d *Daemon) PortCollector() (prometheus.Collector, error) {
	pr, err := podresources.New(filepath.Join(d.opts.KubeletDir, names.PodResourcesSocket), d.opts.Log)
	if err != nil {
		return nil, err
	}
	draPorts := func() ([]portmetrics.Port, error) {
		p := d.draDriver.Load()
		if p == nil {
			return nil, nil
		}
		return withPods(p.Ports(), func() (map[string]podresources.PodRef, error) {
			return pr.DRAPods(context.Background(), d.opts.Config.DRA.Driver())
		})
	}
	return portmetrics.New(filepath.Join(d.opts.StateDir, names.SocketsSubdir),
		portmetrics.Merge(portmetrics.CNIPorts(d.opts.StateDir), draPorts), d.opts.Log), nil
}

// withPods fills in each port's pod; a port whose device no pod holds (yet) is left out.
func withPods(ports []portmetrics.Port, pods func() (map[string]podresources.PodRef, error)) ([]portmetrics.Port, error) {
	if len(ports) == 0 {
		return nil, nil
	}
	byDevice, err := pods()
	if err != nil {
		return nil, fmt.Errorf("port metrics: the DRA ports' pods: %w", err)
	}
	out := ports[:0]
	for _, p := range ports {
		if ref, ok := byDevice[p.Slot]; ok && ref.Namespace == p.Namespace {
			p.Pod = ref.Name
			out = append(out, p)
		}
	}
	return out, nil
}
