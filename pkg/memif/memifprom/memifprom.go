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
// The reason label takes one of a small fixed set (portstatus.Reasons), never the peer's text.
package memifprom

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memifnet/memifnet/pkg/memif"
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
	return prometheus.NewDesc("memifnet_port_"+name, help, labels, nil)
}

var (
	upDesc          = desc("up", "Whether the memif link is connected (1) or not (0).", "port")
	transitionsDesc = desc("link_transitions_total", "Link state changes since the port was opened, by the state changed to.", "port", "to")
	lastDownDesc    = desc("last_disconnect_info", "Why the link last went down (reason from a fixed set); absent until it has.", "port", "reason")
	rxPacketsDesc   = desc("rx_packets_total", "Packets received.", "port", "queue")
	rxBytesDesc     = desc("rx_bytes_total", "Payload bytes of the packets received.", "port", "queue")
	txPacketsDesc   = desc("tx_packets_total", "Packets queued to the peer.", "port", "queue")
	txBytesDesc     = desc("tx_bytes_total", "Payload bytes of the packets queued to the peer.", "port", "queue")
	dropsDesc       = desc("drops_total", "Packets lost: bad descriptors, too large for the receiver's buffer, or unsendable.", "port", "queue", "direction")
	badDescsDesc    = desc("bad_descriptors_total", "Descriptors from the peer that failed validation.", "port", "queue", "direction")
	ringFullDesc    = desc("ring_full_total", "Transmit bursts cut short by a full ring (zero-copy: or an empty pool).", "port", "queue")
	rxNoBufDesc     = desc("rx_no_buffers_total", "Receive ring refills short of pool buffers (zero-copy).", "port", "queue")
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
	counter(transitionsDesc, s.LinkUps, "up")
	counter(transitionsDesc, s.LinkDowns, "down")
	if s.LinkDowns > 0 {
		ch <- prometheus.MustNewConstMetric(lastDownDesc, prometheus.GaugeValue, 1, s.Name, s.LastDownReason)
	}
	for k, q := range s.Rx {
		queue := strconv.Itoa(k)
		counter(rxPacketsDesc, q.Packets, queue)
		counter(rxBytesDesc, q.Bytes, queue)
		counter(dropsDesc, q.Drops, queue, "rx")
		counter(badDescsDesc, q.BadDescs, queue, "rx")
		counter(rxNoBufDesc, q.NoBuf, queue)
	}
	for k, q := range s.Tx {
		queue := strconv.Itoa(k)
		counter(txPacketsDesc, q.Packets, queue)
		counter(txBytesDesc, q.Bytes, queue)
		counter(dropsDesc, q.Drops, queue, "tx")
		counter(badDescsDesc, q.BadDescs, queue, "tx")
		counter(ringFullDesc, q.NoBuf, queue)
	}
}
