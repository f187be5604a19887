// Package dpmetrics is the device plugin backend's Prometheus families (memifnet_deviceplugin_*):
// one series per resource (and mode, health, NUMA node), read from the resources, their kubelet
// servers and the pools at scrape time. The DRA driver's are in package dra, the out-of-service
// families of both backends in package device.
package dpmetrics

import (
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/pools"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/dpserver"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/resource"
)

const dpPrefix = "memifnet_deviceplugin_"

// The device plugin's families, one series per resource (and mode, health, NUMA node), read from
// the resources, servers and pools at scrape time.
var (
	allocDesc = prometheus.NewDesc(dpPrefix+"allocations_total", "Container allocations served.", []string{"resource"}, nil)
	scrubDesc = prometheus.NewDesc(dpPrefix+"scrubs_total", "Devices scrubbed, by where the scrub ran.",
		[]string{"resource", "mode"}, nil)
	// Deprecated, with devices_withheld and devices_scrub_failed: the out-of-service families of
	// package device (backend="deviceplugin") count the same for both backends; these three go in
	// the release after next.
	scrubErrDesc = prometheus.NewDesc(dpPrefix+"scrub_errors_total", "Scrubs that failed.", []string{"resource"}, nil)
	devsDesc     = prometheus.NewDesc(dpPrefix+"devices", "Devices by health.", []string{"resource", "health"}, nil)
	dirtyDesc    = prometheus.NewDesc(dpPrefix+"devices_dirty",
		"Devices handed out and not yet scrubbed (used).", []string{"resource"}, nil)
	freeDesc = prometheus.NewDesc(dpPrefix+"devices_free",
		"Healthy devices not handed out: what the kubelet can allocate now.", []string{"resource"}, nil)
	withheldDesc = prometheus.NewDesc(dpPrefix+"devices_withheld",
		"Pool units out of service while a previous tenant holds their old file.", []string{"resource"}, nil)
	scrubFailedDesc = prometheus.NewDesc(dpPrefix+"devices_scrub_failed",
		"Devices out of service because their scrub failed, until a retried scrub works.", []string{"resource"}, nil)
	regsDesc = prometheus.NewDesc(dpPrefix+"registrations_total",
		"Successful registrations with the kubelet.", []string{"resource"}, nil)
	registeredDesc = prometheus.NewDesc(dpPrefix+"registered",
		"1 when the resource is registered with the kubelet.", []string{"resource"}, nil)
	poolBytesDesc = prometheus.NewDesc(dpPrefix+"pool_bytes",
		"Hugepage memory held by pool units.", []string{"resource", "numa_node"}, nil)
)

// Collector reads the device plugin's families at scrape time.
type Collector struct {
	Resources []*resource.Resource
	Servers   []*dpserver.Server // Servers[i] serves Resources[i]
	Pools     []*pools.Provider
}

// Describe implements prometheus.Collector.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{allocDesc, scrubDesc, scrubErrDesc, devsDesc, dirtyDesc, freeDesc,
		withheldDesc, scrubFailedDesc, regsDesc, registeredDesc, poolBytesDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	m := func(desc *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, typ, v, labels...)
	}
	const counter, gauge = prometheus.CounterValue, prometheus.GaugeValue
	for i, r := range c.Resources {
		st, name := r.Stats(), r.Name()
		m(allocDesc, counter, float64(st.Allocations), name)
		m(scrubDesc, counter, float64(st.SyncScrubs), name, "allocate")
		m(scrubDesc, counter, float64(st.BackgroundScrub), name, "background")
		m(scrubErrDesc, counter, float64(st.ScrubErrors), name)
		m(devsDesc, gauge, float64(st.Healthy), name, "healthy")
		m(devsDesc, gauge, float64(st.Unhealthy), name, "unhealthy")
		m(dirtyDesc, gauge, float64(st.Dirty), name)
		m(freeDesc, gauge, float64(r.Free()), name)
		m(withheldDesc, gauge, float64(st.Withheld), name)
		m(scrubFailedDesc, gauge, float64(st.ScrubFailed), name)
		m(regsDesc, counter, float64(c.Servers[i].Registrations()), name)
		v := 0.0
		if c.Servers[i].Registered() {
			v = 1
		}
		m(registeredDesc, gauge, v, name)
	}
	for _, pp := range c.Pools {
		byNode := pp.Bytes()
		for _, node := range slices.Sorted(maps.Keys(byNode)) {
			m(poolBytesDesc, gauge, float64(byNode[node]), pp.Resource(), strconv.Itoa(node))
		}
	}
}
