package agentmetrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// The per-port metrics the node agent exports (issue 21 part 1), labelled namespace, pod, port
// and link.
const (
	MetricUp        = "memifnet_port_up"
	MetricRxPackets = "memifnet_port_rx_packets_total"
	MetricTxPackets = "memifnet_port_tx_packets_total"
	MetricRxBytes   = "memifnet_port_rx_bytes_total"
	MetricTxBytes   = "memifnet_port_tx_bytes_total"
	MetricDrops     = "memifnet_port_drops_total"
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
		k := Key{s.Labels["namespace"], s.Labels["pod"], s.Labels["port"]}
		if k.Namespace == "" || k.Pod == "" || k.Port == "" {
			continue
		}
		c := snap.Ports[k]
		if l := s.Labels["link"]; l != "" {
			c.Link = l
		}
		// Counters add up over the port's other labels: pkg/memif/memifprom counts per queue.
		switch s.Name {
		case MetricUp:
			c.HasUp, c.Up = true, s.Value == 1
		case MetricRxPackets:
			c.RxPackets += s.Value
		case MetricTxPackets:
			c.TxPackets += s.Value
		case MetricRxBytes:
			c.RxBytes += s.Value
		case MetricTxBytes:
			c.TxBytes += s.Value
		case MetricDrops:
			c.Drops += s.Value
		}
		snap.Ports[k] = c
	}
	return snap
}

// IsPortMetric keeps the per-port metrics.
func IsPortMetric(name string) bool { return strings.HasPrefix(name, "memifnet_port_") }

// Source reads a node's per-port metrics. An error says why there are none (the agent does not
// run there, the user may not reach it, it exports no per-port metrics); callers show "-".
type Source interface {
	Scrape(ctx context.Context, node string) (Snapshot, error)
}

// Proxy reads the agent's /metrics through the API server's pod proxy
// (GET /api/v1/namespaces/<ns>/pods/<agent>:<port>/proxy/metrics). RBAC the user needs, in the
// agent's namespace only: list pods (to find the node's agent) and get pods/proxy.
type Proxy struct {
	Client    kubernetes.Interface
	Namespace string // the agent's namespace, memifnet-system
	Selector  string // the agent pods' label selector
}

// DefaultPort is the agent's --http-address port, used when its pod names no "metrics" port.
const DefaultPort = 9102

// Scrape implements Source.
func (p Proxy) Scrape(ctx context.Context, node string) (Snapshot, error) {
	pods, err := p.Client.CoreV1().Pods(p.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: p.Selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return Snapshot{}, fmt.Errorf("finding the node agent in %s: %w", p.Namespace, err)
	}
	var agent *corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning {
			agent = &pods.Items[i]
		}
	}
	if agent == nil {
		return Snapshot{}, fmt.Errorf("no running node agent (%s) on node %s in %s", p.Selector, node, p.Namespace)
	}
	body, err := p.Client.CoreV1().Pods(p.Namespace).ProxyGet("http", agent.Name, strconv.Itoa(metricsPort(agent)), "metrics", nil).DoRaw(ctx)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return Snapshot{}, fmt.Errorf("pods/proxy of %s/%s is forbidden: %w", p.Namespace, agent.Name, err)
		}
		return Snapshot{}, fmt.Errorf("reading %s/%s's metrics through the API server: %w%s", p.Namespace, agent.Name, err, reason(body, err))
	}
	at := time.Now()
	samples, err := Parse(bytes.NewReader(body), IsPortMetric)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%s/%s's metrics: %w", p.Namespace, agent.Name, err)
	}
	if len(samples) == 0 {
		return Snapshot{}, fmt.Errorf("node agent %s/%s exports no per-port metrics (%s...)", p.Namespace, agent.Name, MetricUp)
	}
	return FromSamples(at, samples), nil
}

// reason is what the API server said beyond the status code, e.g. the pod proxy's "address
// not allowed" (it proxies only to global unicast pod IPs). client-go keeps a plain-text answer
// as a cause; a Status (JSON or protobuf, as the API server encodes it for this client) it does
// not decode on a raw request, so the body is decoded here.
func reason(body []byte, err error) string {
	if obj, _, derr := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil); derr == nil {
		if st, ok := obj.(*metav1.Status); ok && strings.TrimSpace(st.Message) != "" {
			return ": " + strings.TrimSpace(st.Message)
		}
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil {
		return ""
	}
	var msgs []string
	for _, c := range st.Status().Details.Causes {
		if m := strings.TrimSpace(c.Message); m != "" && m != "unknown" {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return ": " + strings.Join(msgs, "; ")
}

func metricsPort(pod *corev1.Pod) int {
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "metrics" {
				return int(cp.ContainerPort)
			}
		}
	}
	return DefaultPort
}

// Rates are per-second rates of a port between two snapshots.
type Rates struct {
	RxPPS, TxPPS float64
	RxBPS, TxBPS float64 // bytes per second
}

// Rate is the port's rates from a to b; false when either lacks the port, the interval is not
// positive, or a counter went back (the pod's port was reopened).
func Rate(a, b Snapshot, k Key) (Rates, bool) {
	ca, ok1 := a.Ports[k]
	cb, ok2 := b.Ports[k]
	dt := b.At.Sub(a.At).Seconds()
	if !ok1 || !ok2 || dt <= 0 || cb.RxPackets < ca.RxPackets || cb.TxPackets < ca.TxPackets ||
		cb.RxBytes < ca.RxBytes || cb.TxBytes < ca.TxBytes {
		return Rates{}, false
	}
	return Rates{
		RxPPS: (cb.RxPackets - ca.RxPackets) / dt, TxPPS: (cb.TxPackets - ca.TxPackets) / dt,
		RxBPS: (cb.RxBytes - ca.RxBytes) / dt, TxBPS: (cb.TxBytes - ca.TxBytes) / dt,
	}, true
}
