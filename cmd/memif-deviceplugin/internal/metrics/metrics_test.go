package metrics

import (
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	var b strings.Builder
	err := Write(&b, []Family{
		{Name: "x_total", Help: "a\nb", Type: "counter", Samples: []Sample{{Labels: []string{"r", `q"\`}, Value: 3}}},
		{Name: "y", Help: "h", Type: "gauge", Samples: []Sample{{Value: 0.5}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "# HELP x_total a\\nb\n# TYPE x_total counter\nx_total{r=\"q\\\"\\\\\"} 3\n# HELP y h\n# TYPE y gauge\ny 0.5\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
