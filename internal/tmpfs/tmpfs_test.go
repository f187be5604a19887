package tmpfs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]Size{"0": 0, "65536": 65536, "64Ki": 64 << 10, "1Mi": 1 << 20, "2Gi": 2 << 30, "1Ti": 1 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Ki", "-1", "1.5Mi", "1MiB", "1K", "1 Mi", "0x10", "99999999999Ti", "99999999999999999999"} {
		if got, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), "bad quantity") {
			t.Errorf("ParseSize(%q) = %d, %v; want a bad quantity error", in, got, err)
		}
	}
}

func TestSizeString(t *testing.T) {
	for s, want := range map[Size]string{0: "0", 1: "1", 4096: "4Ki", 1536: "1536", 16 << 20: "16Mi", 1 << 30: "1Gi", 3 << 40: "3Ti"} {
		if got := s.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(s), got, want)
		}
	}
}

// The file form: a size as a string or a number; written back as a string; unset fields omitted.
func TestLimitsJSON(t *testing.T) {
	for in, want := range map[string]Limits{
		`{"size":"64Ki","inodes":16}`: {Size: 64 << 10, Inodes: 16},
		`{"size":65536}`:              {Size: 64 << 10},
		`{"inodes":8}`:                {Inodes: 8},
		`{}`:                          {},
	} {
		var l Limits
		if err := json.Unmarshal([]byte(in), &l); err != nil || l != want {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", in, l, err, want)
		}
	}
	if err := json.Unmarshal([]byte(`{"size":"1MB"}`), new(Limits)); err == nil || !strings.Contains(err.Error(), `bad quantity "1MB"`) {
		t.Errorf("size 1MB: %v, want a bad quantity error", err)
	}
	b, err := json.Marshal(Limits{Size: 1 << 20, Inodes: 64})
	if err != nil || string(b) != `{"size":"1Mi","inodes":64}` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	if b, _ := json.Marshal(Limits{}); string(b) != `{}` {
		t.Errorf("Marshal of unset limits = %s, want {}", b)
	}
}

func TestOr(t *testing.T) {
	d := Limits{Size: 64 << 10, Inodes: 16}
	if got := (Limits{Inodes: 4}).Or(d); got != (Limits{Size: 64 << 10, Inodes: 4}) {
		t.Errorf("Or = %+v", got)
	}
	if got := (Limits{Size: 1 << 20}).Or(d); got != (Limits{Size: 1 << 20, Inodes: 16}) {
		t.Errorf("Or = %+v", got)
	}
}

func TestCheck(t *testing.T) {
	b := Bounds{Min: Limits{Size: 4 << 10, Inodes: 4}, Max: Limits{Size: 16 << 20, Inodes: 4096}}
	if errs := (Limits{Size: 4 << 10, Inodes: 4096}).Check("linkLimits", b); len(errs) != 0 {
		t.Errorf("limits at the bounds: %v", errs)
	}
	errs := (Limits{Size: 1 << 30, Inodes: 2}).Check("dra.linkLimits", b)
	got := errors.Join(errs...).Error()
	want := "dra.linkLimits.size: \"1Gi\" out of range 4Ki..16Mi\ndra.linkLimits.inodes: 2 out of range 4..4096"
	if got != want {
		t.Errorf("Check = %q, want %q", got, want)
	}
	var re *RangeError
	if !errors.As(errs[0], &re) || re.Name() != "dra.linkLimits.size" || re.Field != "size" {
		t.Errorf("first error %#v, want a *RangeError for dra.linkLimits.size", errs[0])
	}
}
