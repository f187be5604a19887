package names

import "testing"

func TestIsMemifnetMount(t *testing.T) {
	for _, c := range []struct {
		fstype, source string
		want           bool
	}{
		{"tmpfs", SlotMountSource, true},
		{"tmpfs", LinkMountSource, true},
		{"hugetlbfs", PoolMountSourcePrefix + DefaultPool, true},
		{"hugetlbfs", PoolMountSourcePrefix, false}, // no pool name
		{"hugetlbfs", "hugetlbfs", false},
		{"tmpfs", PoolMountSourcePrefix + DefaultPool, false}, // a pool source on a tmpfs
		{"tmpfs", "tmpfs", false},
		{"hugetlbfs", SlotMountSource + "x", true}, // any memifnet-<name> hugetlbfs is a pool
		{"overlay", SlotMountSource, false},
	} {
		if got := IsMemifnetMount(c.fstype, c.source); got != c.want {
			t.Errorf("IsMemifnetMount(%q, %q) = %v, want %v", c.fstype, c.source, got, c.want)
		}
	}
}
