package cli

import (
	"io"
	"strings"
	"text/tabwriter"
)

// table writes aligned columns as kubectl get does (three spaces between columns).
type table struct{ w *tabwriter.Writer }

func newTable(w io.Writer) *table { return &table{tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)} }

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	_, _ = io.WriteString(t.w, strings.Join(cells, "\t")+"\n")
}

func (t *table) flush() error { return t.w.Flush() }
