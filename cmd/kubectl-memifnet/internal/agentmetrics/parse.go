// Package agentmetrics reads the node agent's per-port metrics (memifnet_port_*, labelled
// namespace, pod, port and link) from its local Prometheus endpoint through a port-forward to the
// agent pod, so that a user needs RBAC only (no network path to the node). An agent that does not
// export them, or that the user may not reach, gives no numbers and a reason, never an error:
// the plugin then shows "-".
package agentmetrics

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/prometheus/common/expfmt"
)

// Sample is one sample of the Prometheus text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// maxBody bounds what is read from an agent: its whole exposition is a few hundred KiB at most.
const maxBody = 16 << 20

// maxLine bounds one line: a sample with its labels is well under 1 KiB.
const maxLine = 1 << 20

// Parse reads the text exposition format (version 0.0.4) and returns the samples whose metric
// name keep accepts, in name order and, within a name, in the order served. The lines of those
// metrics are parsed by expfmt; comments and other metrics' lines are dropped by name before it,
// so an agent's other metrics (and their HELP and TYPE lines) cannot break the reading of these.
// Without their TYPE lines the samples are untyped: a value is a value.
func Parse(r io.Reader, keep func(name string) bool) ([]Sample, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxBody))
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var kept bytes.Buffer
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name := metricName(line)
		if name == "" {
			return nil, fmt.Errorf("line %d: no metric name in %q", n, clip(line))
		}
		if keep(name) {
			kept.Write(line)
			kept.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(&kept)
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, name := range slices.Sorted(maps.Keys(families)) {
		for _, m := range families[name].GetMetric() {
			s := Sample{Name: name, Labels: make(map[string]string, len(m.GetLabel())), Value: m.GetUntyped().GetValue()}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func clip(s []byte) string {
	if len(s) > 80 {
		return string(s[:80]) + "..."
	}
	return string(s)
}

// metricName is the leading metric name of a sample line (the legacy name charset: the agent's
// names are all of it).
func metricName(line []byte) string {
	i := 0
	for i < len(line) {
		c := line[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':' || i > 0 && c >= '0' && c <= '9') {
			break
		}
		i++
	}
	return string(line[:i])
}
