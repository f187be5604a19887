package names

import (
	"regexp"
	"strings"
	"testing"
)

func TestIsDNSLabel(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "chain-1": true, "0": true, "a-b-c9": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, "a-": false, "A": false, "a_b": false, "a.b": false, "ä": false,
		strings.Repeat("a", 64): false, "a/b": false, "..": false,
	} {
		if got := IsDNSLabel(s); got != want {
			t.Errorf("IsDNSLabel(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzIsDNSLabel checks the hand-written check against a DNS label regexp.
func FuzzIsDNSLabel(f *testing.F) {
	re := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	for _, s := range []string{"", "a", "-", "a-", "chain-1", strings.Repeat("a", 63), strings.Repeat("a", 64), "A", "a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if IsDNSLabel(s) != re.MatchString(s) {
			t.Fatalf("IsDNSLabel(%q) = %v, regexp says %v", s, IsDNSLabel(s), re.MatchString(s))
		}
	})
}
