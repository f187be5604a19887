package ports_test

import (
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
)

func TestParseForPodResolvesOrdinal(t *testing.T) {
	lbl := map[string]string{names.PodIndexLabel: "2"}
	for _, ann := range []string{`east@ab-{ordinal}`, `[{"name":"east","link":"ab-{ordinal}"}]`} {
		ps, err := ports.ParseForPod(ann, lbl)
		if err != nil || len(ps) != 1 || ps[0].Link != "ab-2" {
			t.Fatalf("ParseForPod(%q) = %+v, %v; want link ab-2", ann, ps, err)
		}
	}
}

func TestParseForPodRefusals(t *testing.T) {
	for _, c := range []struct {
		ann    string
		labels map[string]string
	}{
		{`east@ab-{ordinal}`, nil},
		{`east@ab-{ordinal}`, map[string]string{names.PodIndexLabel: "01"}},
		{`east@ab-{ordinal}`, map[string]string{names.PodIndexLabel: "-1"}},
		{`east@ab-{index}`, map[string]string{names.PodIndexLabel: "1"}},
		{`east@ab-{ordinal`, map[string]string{names.PodIndexLabel: "1"}},
		{`east@ab-{ordinal},west@ab-{ordinal}`, map[string]string{names.PodIndexLabel: "1"}},
	} {
		_, err := ports.ParseForPod(c.ann, c.labels)
		if err == nil || !strings.Contains(err.Error(), `field "link"`) {
			t.Errorf("ParseForPod(%q, %v) error %v, want a refusal naming field \"link\"", c.ann, c.labels, err)
		}
	}
	// Plain Parse keeps refusing braces: a caller without the pod's labels cannot resolve them.
	if _, err := ports.Parse(`east@ab-{ordinal}`); err == nil {
		t.Error("Parse accepted an unresolved {ordinal}")
	}
}

func TestParseLeftUnresolvedSaysWho(t *testing.T) {
	_, err := ports.Parse(`east@ab-{ordinal}`)
	if err == nil || !strings.Contains(err.Error(), "memif-webhook") || !strings.Contains(err.Error(), `field "link"`) {
		t.Fatalf("Parse of an unresolved {ordinal}: %v; want a refusal of field \"link\" naming memif-webhook", err)
	}
}

// FuzzParseForPod: whatever the annotation and label, an accepted result names only valid,
// resolved links, and without a placeholder ParseForPod agrees with Parse.
func FuzzParseForPod(f *testing.F) {
	f.Add(`east@ab-{ordinal},west@cd-{ordinal}`, "3")
	f.Add(`[{"name":"east","link":"{ordinal}{ordinal}"}]`, "01")
	f.Add(`east@x`, "")
	f.Fuzz(func(t *testing.T, ann, ord string) {
		ps, err := ports.ParseForPod(ann, map[string]string{names.PodIndexLabel: ord})
		if err != nil {
			return
		}
		for _, p := range ps {
			if p.Link != "" && (names.HasPlaceholder(p.Link) || !names.IsDNSLabel(p.Link) || len(p.Link) > names.MaxLinkNameLen) {
				t.Fatalf("ParseForPod(%q, %q) accepted link %q", ann, ord, p.Link)
			}
		}
		if !strings.ContainsAny(ann, "{}") {
			if _, perr := ports.Parse(ann); perr != nil {
				t.Fatalf("ParseForPod accepted %q, Parse refused it: %v", ann, perr)
			}
		}
	})
}
