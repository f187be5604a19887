package portmetrics

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	n "github.com/memifnet/memifnet/pkg/memif/portmetricnames"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// MinInterval is how long one pass over the status files serves scrapes: however often the
// endpoint is scraped, the files are read at most once per MinInterval.
const MinInterval = time.Second

// Collector is a prometheus.Collector of every port's status file. The per-port metrics have
// the names and meaning of pkg/memif/memifprom's, labelled namespace, pod, port and link
// instead of per queue (a status file sums the queues):
//
//	memifnet_port_up                        1 while the link is up (0 when down or the file stale)
//	memifnet_port_link_transitions_total    link changes, to="up" or "down"
//	memifnet_port_last_disconnect_info      1, once the link went down: why (a fixed set), last
//	memifnet_port_{rx,tx}_{packets,bytes}_total
//	memifnet_port_drops_total, memifnet_port_bad_descriptors_total   direction="rx" or "tx"
//	memifnet_port_ring_full_total, memifnet_port_rx_no_buffers_total
//	memifnet_port_status_time_seconds       when the application took these counters (rates: over its change)
//	memifnet_link_up{namespace,link,claim}  1 while both ends of a pod-to-pod link are up
//	                                        (claim: the DRA claim of a DRA link, "" for memif-cni's)
//	memifnet_port_status_errors_total{reason}  status files that gave no status
//
// The numbers are what the pod's application wrote: a pod can lie about its own port, never
// about another's (the labels come from the node's state, not from the file).
type Collector struct {
	slotsDir string
	ports    Source
	log      *slog.Logger
	now      func() time.Time
	budget   time.Duration // PassBudget (tests change it)

	// pass is held by the one pass over the files at a time; mu only while the cache below is
	// read or replaced, never across file I/O, so that a scrape never queues behind a pass
	// when there are readings to serve.
	pass     sync.Mutex
	mu       sync.Mutex
	readAt   time.Time
	readings []Reading
	last     map[string]string // slot -> the reason of its last reading, to log changes only (pass)
	errors   *prometheus.CounterVec
}

// PassBudget bounds one pass over the status files: the ports not yet read when it is spent
// count as unreadable for this pass. Each read is bounded on its own (no open blocks, at most
// 4 KiB read), so this only caps a node with very many ports or a stalled disk.
const PassBudget = 5 * time.Second

// errPassBudget is the error of a port the pass had no time left for.
var errPassBudget = errors.New("not read: the pass over the status files took longer than its budget")

// New returns a Collector of the status files of the ports that ports lists, in their slots
// under slotsDir (<state>/sockets).
func New(slotsDir string, ports Source, log *slog.Logger) *Collector {
	return &Collector{slotsDir: slotsDir, ports: ports, log: log, now: time.Now, budget: PassBudget, last: map[string]string{},
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.StatusErrors,
			Help: "Status files (<slot>/status.json) that gave no status, by why: refused (not a regular file, or too large), invalid, unreadable."},
			[]string{n.LabelReason})}
}

var portLabels = []string{n.LabelNamespace, n.LabelPod, n.LabelPort, n.LabelLink}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string(nil), portLabels...), extra...), nil)
}

// The names and, but for up's, the help texts are memifprom's (pkg/memif/portmetricnames).
var (
	upDesc          = desc(n.Up, "Whether the memif link is connected (1) or not (0), as the port's status file says (0 when the file is stale).")
	transitionsDesc = desc(n.LinkTransitions, n.HelpLinkTransitions, n.LabelTo)
	lastDownDesc    = desc(n.LastDisconnect, n.HelpLastDisconnect, n.LabelReason)
	rxPacketsDesc   = desc(n.RxPackets, n.HelpRxPackets)
	rxBytesDesc     = desc(n.RxBytes, n.HelpRxBytes)
	txPacketsDesc   = desc(n.TxPackets, n.HelpTxPackets)
	txBytesDesc     = desc(n.TxBytes, n.HelpTxBytes)
	dropsDesc       = desc(n.Drops, n.HelpDrops, n.LabelDirection)
	badDescsDesc    = desc(n.BadDescriptors, n.HelpBadDescriptors, n.LabelDirection)
	ringFullDesc    = desc(n.RingFull, n.HelpRingFull)
	rxNoBufDesc     = desc(n.RxNoBuffers, n.HelpRxNoBuffers)
	statusTimeDesc  = desc(n.StatusTime, n.HelpStatusTime)
	linkUpDesc      = prometheus.NewDesc(n.LinkUp, "Whether both ends of a pod-to-pod link on this node are up (1) or not (0); claim is the DRA claim of a DRA link, empty for a memif-cni link.", []string{n.LabelNamespace, n.LabelLink, n.LabelClaim}, nil)
	allDescs        = []*prometheus.Desc{upDesc, transitionsDesc, lastDownDesc, rxPacketsDesc, rxBytesDesc, txPacketsDesc,
		txBytesDesc, dropsDesc, badDescsDesc, ringFullDesc, rxNoBufDesc, statusTimeDesc, linkUpDesc}
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.Readings() {
		if r.Reason == "" {
			collectPort(ch, r)
		}
	}
	for key, up := range links(c.Readings()) {
		ch <- prometheus.MustNewConstMetric(linkUpDesc, prometheus.GaugeValue, bool01(up), key.namespace, key.link, key.claim)
	}
	c.errors.Collect(ch)
}

// Readings returns every port's status, read at most MinInterval ago. While a pass is under
// way, a caller that has earlier readings gets those instead of waiting.
func (c *Collector) Readings() []Reading {
	if rs, fresh := c.cached(); fresh {
		return rs
	}
	if !c.pass.TryLock() {
		if rs, _ := c.cached(); rs != nil {
			return rs
		}
		c.pass.Lock() // the first pass: nothing to serve before it ends
	}
	defer c.pass.Unlock()
	if rs, fresh := c.cached(); fresh {
		return rs // another caller's pass ended meanwhile
	}
	now := c.now()
	rs := c.read(now)
	c.mu.Lock()
	c.readings, c.readAt = rs, now
	c.mu.Unlock()
	return rs
}

// cached returns the last readings and whether they are fresh.
func (c *Collector) cached() ([]Reading, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readings, c.readings != nil && c.now().Sub(c.readAt) < MinInterval
}

// read is one pass over every port's status file (c.pass held).
func (c *Collector) read(now time.Time) []Reading {
	ports, err := c.ports()
	if err != nil {
		c.log.Warn("port metrics: listing the node's ports", "err", err)
	}
	deadline := time.Now().Add(c.budget)
	rs := make([]Reading, 0, len(ports))
	seen := map[string]string{}
	for _, p := range ports {
		r := Reading{Port: p, Reason: ReasonUnreadable, Err: errPassBudget}
		if time.Now().Before(deadline) {
			r = Read(c.slotsDir, p, now)
		}
		rs = append(rs, r)
		seen[p.Slot] = r.Reason
		if r.Reason != "" && r.Reason != ReasonMissing {
			c.errors.WithLabelValues(r.Reason).Inc()
		}
		if prev, ok := c.last[p.Slot]; (!ok || prev != r.Reason) && r.Err != nil {
			c.log.Warn("port metrics: status file gives no status", "namespace", p.Namespace, "pod", p.Pod, "port", p.Port, "reason", r.Reason, "err", r.Err)
		}
	}
	c.last = seen
	return rs
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func collectPort(ch chan<- prometheus.Metric, r Reading) {
	labels := []string{r.Namespace, r.Pod, r.Port.Port, r.Link}
	metric := func(d *prometheus.Desc, t prometheus.ValueType, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, append(labels[:4:4], extra...)...)
	}
	counter := func(d *prometheus.Desc, v uint64, extra ...string) {
		metric(d, prometheus.CounterValue, float64(v), extra...)
	}
	s := r.Status
	metric(upDesc, prometheus.GaugeValue, bool01(r.Up()))
	metric(statusTimeDesc, prometheus.GaugeValue, float64(s.Time.UnixMilli())/1e3)
	counter(transitionsDesc, s.LinkUps, n.ToUp)
	counter(transitionsDesc, s.LinkDowns, n.ToDown)
	if s.LastDownReason != portstatus.ReasonNone {
		metric(lastDownDesc, prometheus.GaugeValue, 1, s.LastDownReason)
	}
	counter(rxPacketsDesc, s.Rx.Packets)
	counter(rxBytesDesc, s.Rx.Bytes)
	counter(txPacketsDesc, s.Tx.Packets)
	counter(txBytesDesc, s.Tx.Bytes)
	counter(dropsDesc, s.Rx.Drops, n.DirectionRx)
	counter(dropsDesc, s.Tx.Drops, n.DirectionTx)
	counter(badDescsDesc, s.Rx.BadDescriptors, n.DirectionRx)
	counter(badDescsDesc, s.Tx.BadDescriptors, n.DirectionTx)
	counter(ringFullDesc, s.Tx.RingFull)
	counter(rxNoBufDesc, s.Rx.RingFull)
}

// linkKey names a link: memif-cni's by namespace and link name, a DRA link by its claim too (its
// free-text link name may be anything, a memif-cni link's name or another claim's).
type linkKey struct{ namespace, claim, link string }

// links is the state of every pod-to-pod link: up when it has two ends and both are up.
func links(rs []Reading) map[linkKey]bool {
	ends := map[linkKey][]bool{}
	for _, r := range rs {
		if r.Link == "" {
			continue
		}
		k := linkKey{r.Namespace, r.Claim, r.Link}
		ends[k] = append(ends[k], r.Up())
	}
	out := map[linkKey]bool{}
	for k, e := range ends {
		out[k] = len(e) == 2 && e[0] && e[1]
	}
	return out
}
