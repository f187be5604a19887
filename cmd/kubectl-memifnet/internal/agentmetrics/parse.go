// Package agentmetrics reads the node agent's per-port metrics (memifnet_port_*, labelled
// namespace, pod, port and link) from its local Prometheus endpoint through a port-forward to the
// agent pod, so that a user needs RBAC only (no network path to the node). An agent that does not
// export them, or that the user may not reach, gives no numbers and a reason, never an error:
// the plugin then shows "-".
package agentmetrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Sample is one line of the Prometheus text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// maxBody bounds what is read from an agent: its whole exposition is a few hundred KiB at most.
const maxBody = 16 << 20

// Parse reads the text exposition format (version 0.0.4) and returns the samples whose metric
// name keep accepts. Comments and other metrics are skipped unparsed beyond their name, so an
// agent's other metrics cannot break the reading of these.
func Parse(r io.Reader, keep func(name string) bool) ([]Sample, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxBody))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Sample
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := cutName(line)
		if name == "" {
			return nil, fmt.Errorf("line %d: no metric name in %q", n, clip(line))
		}
		if !keep(name) {
			continue
		}
		s, err := parseSample(name, rest)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n, name, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func isNameByte(c byte, first bool) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':' || !first && c >= '0' && c <= '9'
}

func cutName(s string) (string, string) {
	i := 0
	for i < len(s) && isNameByte(s[i], i == 0) {
		i++
	}
	return s[:i], s[i:]
}

func parseSample(name, rest string) (Sample, error) {
	s := Sample{Name: name, Labels: map[string]string{}}
	if strings.HasPrefix(rest, "{") {
		var err error
		if rest, err = parseLabels(rest[1:], s.Labels); err != nil {
			return s, err
		}
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp, got %q", clip(rest))
	}
	v, err := parseValue(f[0])
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

func parseValue(v string) (float64, error) {
	switch v {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q is not a number", clip(v))
	}
	return f, nil
}

// parseLabels reads `a="x",b="y"}` into m and returns what follows the closing brace.
func parseLabels(s string, m map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		name, rest := cutName(s)
		if name == "" {
			return "", fmt.Errorf("bad label name at %q", clip(s))
		}
		rest = strings.TrimLeft(rest, " \t")
		if !strings.HasPrefix(rest, `="`) {
			return "", fmt.Errorf("label %s: want =\"value\"", name)
		}
		val, after, err := unquote(rest[2:])
		if err != nil {
			return "", fmt.Errorf("label %s: %w", name, err)
		}
		if _, dup := m[name]; dup {
			return "", fmt.Errorf("label %s given twice", name)
		}
		m[name] = val
		s = strings.TrimLeft(after, " \t")
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		} else if !strings.HasPrefix(s, "}") {
			return "", fmt.Errorf("after label %s: want , or }", name)
		}
	}
}

// unquote reads a label value up to its closing quote; the format escapes only \\, \" and \n.
func unquote(s string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 == len(s) {
				return "", "", fmt.Errorf("unterminated escape")
			}
			i++
			switch s[i] {
			case '\\':
				b.WriteByte('\\')
			case '"':
				b.WriteByte('"')
			case 'n':
				b.WriteByte('\n')
			default:
				return "", "", fmt.Errorf("unknown escape \\%c", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated value")
}
