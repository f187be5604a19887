// Package memifprom exports the link state and per-queue counters of pkg/memif interfaces as
// Prometheus metrics. An application creates a Collector for its interfaces and registers it
// (see the example); pkg/memif itself does not depend on Prometheus.
//
// Every metric is labelled port (the interface's Config.Name: give each a distinct one) and,
// per queue, queue (its number). Counters are read at scrape time from memif's own counters, so
// the data path pays nothing for them.
//
//	memifnet_port_up{port}                                  1 while the link is connected
//	memifnet_port_link_transitions_total{port,to}           link changes, to="up" or "down"
//	memifnet_port_last_disconnect_info{port,reason}         1, once the link went down: why, last
//	memifnet_port_rx_packets_total{port,queue}              packets received
//	memifnet_port_rx_bytes_total{port,queue}                their bytes
//	memifnet_port_tx_packets_total{port,queue}              packets queued to the peer
//	memifnet_port_tx_bytes_total{port,queue}                their bytes
//	memifnet_port_drops_total{port,queue,direction}         packets lost, direction="rx" or "tx"
//	memifnet_port_bad_descriptors_total{port,queue,direction} peer descriptors that failed validation
//	memifnet_port_ring_full_total{port,queue}               transmit bursts cut short by a full ring
//	memifnet_port_rx_no_buffers_total{port,queue}           receive ring refills short of pool buffers
//
// The names are pkg/memif/portmetricnames' (the node agent exports the same names from the
// pods' status files). The reason label takes one of a small fixed set (portstatus.Reasons),
// never the peer's text.
package memifprom

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memifnet/memifnet/pkg/memif"
	n "github.com/memifnet/memifnet/pkg/memif/portmetricnames"
)

// Collector is a prometheus.Collector over a set of interfaces. It may be used from any
// goroutine; a scrape snapshots each interface with Interface.Stats.
type Collector struct {
	mu   sync.Mutex
	ifcs []*memif.Interface
}

// New returns a Collector over ifcs; Add and Remove change the set later.
func New(ifcs ...*memif.Interface) *Collector {
	return &Collector{ifcs: append([]*memif.Interface(nil), ifcs...)}
}

// Add starts exporting an interface's metrics.
func (c *Collector) Add(i *memif.Interface) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ifcs = append(c.ifcs, i)
}

// Remove stops exporting an interface's metrics (before or after it is closed).
func (c *Collector) Remove(i *memif.Interface) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, x := range c.ifcs {
		if x == i {
			c.ifcs = append(c.ifcs[:k], c.ifcs[k+1:]...)
			return
		}
	}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	upDesc          = desc(n.Up, "Whether the memif link is connected (1) or not (0).", n.LabelPort)
	transitionsDesc = desc(n.LinkTransitions, n.HelpLinkTransitions, n.LabelPort, n.LabelTo)
	lastDownDesc    = desc(n.LastDisconnect, n.HelpLastDisconnect, n.LabelPort, n.LabelReason)
	rxPacketsDesc   = desc(n.RxPackets, n.HelpRxPackets, n.LabelPort, n.LabelQueue)
	rxBytesDesc     = desc(n.RxBytes, n.HelpRxBytes, n.LabelPort, n.LabelQueue)
	txPacketsDesc   = desc(n.TxPackets, n.HelpTxPackets, n.LabelPort, n.LabelQueue)
	txBytesDesc     = desc(n.TxBytes, n.HelpTxBytes, n.LabelPort, n.LabelQueue)
	dropsDesc       = desc(n.Drops, n.HelpDrops, n.LabelPort, n.LabelQueue, n.LabelDirection)
	badDescsDesc    = desc(n.BadDescriptors, n.HelpBadDescriptors, n.LabelPort, n.LabelQueue, n.LabelDirection)
	ringFullDesc    = desc(n.RingFull, n.HelpRingFull, n.LabelPort, n.LabelQueue)
	rxNoBufDesc     = desc(n.RxNoBuffers, n.HelpRxNoBuffers, n.LabelPort, n.LabelQueue)
	allDescs        = []*prometheus.Desc{upDesc, transitionsDesc, lastDownDesc, rxPacketsDesc, rxBytesDesc, txPacketsDesc,
		txBytesDesc, dropsDesc, badDescsDesc, ringFullDesc, rxNoBufDesc}
)

// Describe sends the descriptors of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect sends the current metrics of every interface.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ifcs := append([]*memif.Interface(nil), c.ifcs...)
	c.mu.Unlock()
	for _, i := range ifcs {
		collect(ch, i.Stats())
	}
}

func collect(ch chan<- prometheus.Metric, s memif.InterfaceStats) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{s.Name}, labels...)...)
	}
	up := 0.0
	if s.Up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, s.Name)
	counter(transitionsDesc, s.LinkUps, n.ToUp)
	counter(transitionsDesc, s.LinkDowns, n.ToDown)
	if s.LinkDowns > 0 {
		ch <- prometheus.MustNewConstMetric(lastDownDesc, prometheus.GaugeValue, 1, s.Name, s.LastDownReason)
	}
	for k, q := range s.Rx {
		queue := strconv.Itoa(k)
		counter(rxPacketsDesc, q.Packets, queue)
		counter(rxBytesDesc, q.Bytes, queue)
		counter(dropsDesc, q.Drops, queue, n.DirectionRx)
		counter(badDescsDesc, q.BadDescs, queue, n.DirectionRx)
		counter(rxNoBufDesc, q.NoBuf, queue)
	}
	for k, q := range s.Tx {
		queue := strconv.Itoa(k)
		counter(txPacketsDesc, q.Packets, queue)
		counter(txBytesDesc, q.Bytes, queue)
		counter(dropsDesc, q.Drops, queue, n.DirectionTx)
		counter(badDescsDesc, q.BadDescs, queue, n.DirectionTx)
		counter(ringFullDesc, q.NoBuf, queue)
	}
}
