package agentmetrics

import (
	"context"
	"math"
	"strings"
	"time"

	n "github.com/memifnet/memifnet/pkg/memif/portmetricnames"
)

// Key names one pod's port.
type Key struct{ Namespace, Pod, Port string }

// Counters is one port as its node agent reports it.
type Counters struct {
	Link                 string
	HasUp, Up            bool
	RxPackets, TxPackets float64
	RxBytes, TxBytes     float64
	Drops                float64
	// At is when the port's application took these counters (the agent's StatusTime); zero
	// when the agent does not say.
	At time.Time
}

// Snapshot is one scrape of a node's agent.
type Snapshot struct {
	At    time.Time
	Ports map[Key]Counters
}

// FromSamples collects the per-port samples into ports, summing a counter over the labels
// beyond namespace, pod and port (queue); samples without those three are skipped.
func FromSamples(at time.Time, samples []Sample) Snapshot {
	snap := Snapshot{At: at, Ports: map[Key]Counters{}}
	for _, s := range samples {
		k := Key{s.Labels[n.LabelNamespace], s.Labels[n.LabelPod], s.Labels[n.LabelPort]}
		if k.Namespace == "" || k.Pod == "" || k.Port == "" {
			continue
		}
		c := snap.Ports[k]
		if l := s.Labels[n.LabelLink]; l != "" {
			c.Link = l
		}
		// Counters add up over the port's other labels: pkg/memif/memifprom counts per queue.
		switch s.Name {
		case n.Up:
			c.HasUp, c.Up = true, s.Value == 1
		case n.RxPackets:
			c.RxPackets += s.Value
		case n.TxPackets:
			c.TxPackets += s.Value
		case n.RxBytes:
			c.RxBytes += s.Value
		case n.TxBytes:
			c.TxBytes += s.Value
		case n.Drops:
			c.Drops += s.Value
		case n.StatusTime:
			c.At = time.UnixMilli(int64(math.Round(s.Value * 1e3)))
		}
		snap.Ports[k] = c
	}
	return snap
}

// IsPortMetric keeps the per-port metrics (the node agent's, named in pkg/memif/portmetricnames
// and labelled namespace, pod, port and link).
func IsPortMetric(name string) bool { return strings.HasPrefix(name, n.Prefix) }

// Source reads a node's per-port metrics. An error says why there are none (the agent does not
// run there, the user may not reach it, it exports no per-port metrics); callers show "-".
type Source interface {
	Scrape(ctx context.Context, node string) (Snapshot, error)
}

// Rates are per-second rates of a port between two snapshots.
type Rates struct {
	RxPPS, TxPPS float64
	RxBPS, TxBPS float64 // bytes per second
}

// Rate is the port's rates from a to b; false when either lacks the port, the interval is not
// positive, or a counter went back (the pod's port was reopened). The interval is that of the
// counters' own times when the agent gives them (they change only when the port's status file
// is rewritten, every few seconds: over the scrapes' interval a rate would be 0 or several
// times too high), else the scrapes'; with the same own time in both there is no rate yet.
func Rate(a, b Snapshot, k Key) (Rates, bool) {
	ca, ok1 := a.Ports[k]
	cb, ok2 := b.Ports[k]
	dt := b.At.Sub(a.At).Seconds()
	if !ca.At.IsZero() && !cb.At.IsZero() {
		dt = cb.At.Sub(ca.At).Seconds()
	}
	if !ok1 || !ok2 || dt <= 0 || cb.RxPackets < ca.RxPackets || cb.TxPackets < ca.TxPackets ||
		cb.RxBytes < ca.RxBytes || cb.TxBytes < ca.TxBytes {
		return Rates{}, false
	}
	return Rates{
		RxPPS: (cb.RxPackets - ca.RxPackets) / dt, TxPPS: (cb.TxPackets - ca.TxPackets) / dt,
		RxBPS: (cb.RxBytes - ca.RxBytes) / dt, TxBPS: (cb.TxBytes - ca.TxBytes) / dt,
	}, true
}
