package names_test

import (
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/names"
)

func TestResolveLink(t *testing.T) {
	cases := []struct {
		link, ord string
		ok        bool
		want      string // "" means an error is expected
	}{
		{"plain", "", false, "plain"},
		{"ab-{ordinal}", "0", true, "ab-0"},
		{"ab-{ordinal}", "12", true, "ab-12"},
		{"{ordinal}-x-{ordinal}", "3", true, "3-x-3"},
		{"ab-{ordinal}", "", false, ""},
		{"ab-{ordinal}", "", true, ""},
		{"ab-{ordinal}", "-1", true, ""},
		{"ab-{ordinal}", "+1", true, ""},
		{"ab-{ordinal}", "01", true, ""},
		{"ab-{ordinal}", " 1", true, ""},
		{"ab-{ordinal}", "12345678901", true, ""},
		{"ab-{index}", "1", true, ""},
		{"ab-{ordinal", "1", true, ""},
		{"ab}", "1", true, ""},
		{"{ordinal}}", "1", true, ""},
		{"-{ordinal}", "1", true, ""},
		{strings.Repeat("a", 62) + "{ordinal}", "10", true, ""},
	}
	for _, c := range cases {
		got, err := names.ResolveLink(c.link, c.ord, c.ok)
		if c.want == "" {
			if err == nil {
				t.Errorf("ResolveLink(%q, %q, %v) = %q, want error", c.link, c.ord, c.ok, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ResolveLink(%q, %q, %v) = %q, %v; want %q", c.link, c.ord, c.ok, got, err, c.want)
		}
	}
}

func TestResolveLinkErrorNamesLabel(t *testing.T) {
	_, err := names.ResolveLink("ab-{ordinal}", "", false)
	if err == nil || !strings.Contains(err.Error(), names.PodIndexLabel) {
		t.Fatalf("error %v does not name %s", err, names.PodIndexLabel)
	}
}

func FuzzResolveLink(f *testing.F) {
	f.Add("ab-{ordinal}", "3", true)
	f.Add("{ordinal", "01", true)
	f.Fuzz(func(t *testing.T, link, ord string, ok bool) {
		out, err := names.ResolveLink(link, ord, ok)
		if err != nil {
			return
		}
		if names.HasPlaceholder(link) && (len(out) > names.MaxLinkNameLen || !names.IsDNSLabel(out)) {
			t.Fatalf("ResolveLink(%q, %q) = %q: not a valid link name", link, ord, out)
		}
		if !names.HasPlaceholder(link) && out != link {
			t.Fatalf("link without placeholder changed: %q -> %q", link, out)
		}
	})
}
