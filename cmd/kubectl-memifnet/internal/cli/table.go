package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// table writes aligned columns as kubectl get does (three spaces between columns).
type table struct{ w *tabwriter.Writer }

func newTable(w io.Writer) *table { return &table{tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)} }

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = clean(c)
	}
	_, _ = io.WriteString(t.w, strings.Join(cells, "\t")+"\n")
}

func (t *table) flush() error { return t.w.Flush() }

// clean makes text from the cluster safe for a terminal. Event messages carry what pods wrote
// (memif-cni names a symlink a pod planted, with its target), and an annotation is the pod
// author's: control characters (an ANSI escape could rewrite the operator's screen) and bidi
// overrides are shown escaped, as \x1b or \u202e.
func clean(s string) string {
	ok := true
	for _, r := range s {
		if unsafeRune(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError
}
