// Package metrics writes the Prometheus text exposition format. The plugin
// has a handful of metrics, all computed at scrape time, so a client
// library would add more than it saves.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Family is one metric name with its samples.
type Family struct {
	Name    string
	Help    string
	Type    string // counter or gauge
	Samples []Sample
}

// Sample is one value with labels as name/value pairs.
type Sample struct {
	Labels []string
	Value  float64
}

// Write writes families in text format 0.0.4.
func Write(w io.Writer, fams []Family) error {
	bw := bufio.NewWriter(w)
	for _, f := range fams {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", f.Name, escape(f.Help, false), f.Name, f.Type)
		for _, s := range f.Samples {
			bw.WriteString(f.Name)
			if len(s.Labels) > 0 {
				bw.WriteByte('{')
				for i := 0; i+1 < len(s.Labels); i += 2 {
					if i > 0 {
						bw.WriteByte(',')
					}
					fmt.Fprintf(bw, "%s=\"%s\"", s.Labels[i], escape(s.Labels[i+1], true))
				}
				bw.WriteByte('}')
			}
			bw.WriteByte(' ')
			bw.WriteString(strconv.FormatFloat(s.Value, 'g', -1, 64))
			bw.WriteByte('\n')
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}

func escape(s string, quote bool) string {
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	if quote {
		r = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	}
	return r.Replace(s)
}

// Handler serves the families that collect returns at each scrape.
func Handler(collect func() []Family) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = Write(w, collect())
	})
}
