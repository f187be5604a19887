package cli

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/linkview"
)

func runLinks(ctx context.Context, e *env, _ []string) error {
	ns := e.namespace
	if e.allNamespaces {
		ns = ""
	}
	pods, err := e.pods(ctx, ns, metav1.ListOptions{})
	if err != nil {
		return err
	}
	claims, err := e.claims(ctx, ns)
	if err != nil {
		e.note("DRA links not shown: %v", err)
	}
	links := linkview.Links(pods, claims)
	e.addMetrics(ctx, links)
	if e.printer != nil {
		return e.print(struct {
			Links []linkview.Link `json:"links"`
		}{append([]linkview.Link{}, links...)})
	}
	return printLinks(e, links)
}

// addMetrics fills in each end's counters and rates and each link's state from the agents of
// the links' nodes; where there are none the reason goes to the link and, once per node, to
// stderr.
func (e *env) addMetrics(ctx context.Context, links []linkview.Link) {
	var nodes []string
	seen := map[string]bool{}
	for _, l := range links {
		if l.Node != "" && !strings.Contains(l.Node, ",") && !seen[l.Node] && l.Status != linkview.StatusEnded {
			seen[l.Node] = true
			nodes = append(nodes, l.Node)
		}
	}
	first, second, errs := e.scrape(ctx, nodes, true)
	for n, err := range errs {
		e.note("link state and rates on node %s unknown (-): %v", n, err)
	}
	for i := range links {
		l := &links[i]
		if err, bad := errs[l.Node]; bad {
			l.StateUnknownReason = err.Error()
			continue
		}
		a, ok := first[l.Node]
		if !ok {
			continue
		}
		ApplyMetrics(l, *a, second[l.Node])
	}
}

// ApplyMetrics sets the link's ends' stats and its state from a node agent's snapshot (and the
// rates against a later one, when given): up when every pod end is up, down when one is down.
func ApplyMetrics(l *linkview.Link, a agentmetrics.Snapshot, b *agentmetrics.Snapshot) {
	known, up := 0, 0
	pods := 0
	for i := range l.Ends {
		end := &l.Ends[i]
		if end.Pod == "" {
			continue
		}
		pods++
		k := agentmetrics.Key{Namespace: l.Namespace, Pod: end.Pod, Port: end.Port}
		c, ok := a.Ports[k]
		if !ok {
			continue
		}
		st := &linkview.Stats{Up: c.Up, RxPackets: c.RxPackets, TxPackets: c.TxPackets, RxBytes: c.RxBytes, TxBytes: c.TxBytes, Drops: c.Drops}
		if b != nil {
			if r, ok := agentmetrics.Rate(a, *b, k); ok {
				cb := b.Ports[k] // the newer counters
				st = &linkview.Stats{Up: cb.Up, RxPackets: cb.RxPackets, TxPackets: cb.TxPackets, RxBytes: cb.RxBytes, TxBytes: cb.TxBytes,
					Drops: cb.Drops, RxPPS: &r.RxPPS, TxPPS: &r.TxPPS}
			}
		}
		end.Stats = st
		if c.HasUp {
			known++
			if st.Up {
				up++
			}
		}
	}
	switch {
	case known > up:
		l.State = "down"
	case known == pods && pods > 0:
		l.State = "up"
	default:
		l.State = ""
		l.StateUnknownReason = "the node agent reports no state for these ports"
	}
}

// endName is "pod/port", "host" for the host data plane, or "<none>" for a missing pod.
func endName(end linkview.End, host bool) string {
	switch {
	case end.Pod != "":
		return end.Pod + "/" + end.Port
	case host:
		return "host"
	}
	return "<none>"
}

func printLinks(e *env, links []linkview.Link) error {
	t := newTable(e.out)
	hdr := []string{"LINK", "BACKEND", "END-A", "END-B", "NODE", "ROLES", "STATUS", "STATE", "PPS-AB", "PPS-BA", "DROPS"}
	if e.allNamespaces {
		hdr = append([]string{"NAMESPACE"}, hdr...)
	}
	if e.wide {
		hdr = append(hdr, "PHASES", "CLAIM")
	}
	t.row(hdr...)
	for _, l := range links {
		a, b := l.Ends[0], linkview.End{}
		if len(l.Ends) > 1 {
			b = l.Ends[1]
		}
		name := l.Name
		if l.Host {
			name = "<host-port>"
		}
		if len(l.Ends) > 2 {
			name += fmt.Sprintf(" (+%d pods)", len(l.Ends)-2)
		}
		row := []string{name, l.Backend, endName(a, false), endName(b, l.Host), dash(l.Node),
			dash(a.Role) + "/" + dash(b.Role), l.Status, dash(l.State), pps(a, b), pps(b, a), drops(a, b)}
		if e.allNamespaces {
			row = append([]string{l.Namespace}, row...)
		}
		if e.wide {
			row = append(row, dash(a.Phase)+"/"+dash(b.Phase), dash(l.Claim))
		}
		t.row(row...)
	}
	if len(links) == 0 {
		fmt.Fprintln(e.errw, "No memif links found"+where(e.namespaceIf()))
		return nil
	}
	return t.flush()
}

func (e *env) namespaceIf() string {
	if e.allNamespaces {
		return ""
	}
	return e.namespace
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// pps is the packets per second from a to b: what b received, else what a sent.
func pps(a, b linkview.End) string {
	switch {
	case b.Stats != nil && b.Stats.RxPPS != nil:
		return humanRate(*b.Stats.RxPPS)
	case a.Stats != nil && a.Stats.TxPPS != nil:
		return humanRate(*a.Stats.TxPPS)
	}
	return "-"
}

func drops(ends ...linkview.End) string {
	var n float64
	known := false
	for _, e := range ends {
		if e.Stats != nil {
			n += e.Stats.Drops
			known = true
		}
	}
	if !known {
		return "-"
	}
	return fmt.Sprintf("%.0f", n)
}

func humanRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
