package safefs

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	in := "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n" +
		"\n" +
		`40 22 0:50 / /tmp/a\040b\134c rw,nosuid,nodev,noexec shared:7 master:3 - tmpfs memifnet-slot rw,size=65536k,nr_inodes=64` + "\n" +
		"41 22 0:51 / /dev/hugepages/pool rw,relatime - hugetlbfs none rw,pagesize=2M,min_size=8388608\n" +
		"42 22 0:52 / /x rw unbindable - proc proc\n"
	got, err := ParseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []MountEntry{
		{ID: 36, Parent: 35, Dev: "98:0", Root: "/mnt1", Point: "/mnt2", Options: "rw,noatime", Optional: []string{"master:1"},
			FSType: "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue"},
		{ID: 40, Parent: 22, Dev: "0:50", Root: "/", Point: `/tmp/a b\c`, Options: "rw,nosuid,nodev,noexec",
			Optional: []string{"shared:7", "master:3"}, FSType: "tmpfs", Source: "memifnet-slot", SuperOptions: "rw,size=65536k,nr_inodes=64"},
		{ID: 41, Parent: 22, Dev: "0:51", Root: "/", Point: "/dev/hugepages/pool", Options: "rw,relatime", Optional: []string{},
			FSType: "hugetlbfs", Source: "none", SuperOptions: "rw,pagesize=2M,min_size=8388608"},
		{ID: 42, Parent: 22, Dev: "0:52", Root: "/", Point: "/x", Options: "rw", Optional: []string{"unbindable"},
			FSType: "proc", Source: "proc"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	for i, p := range []string{"slave", "shared,slave", "private", "unbindable"} {
		if got[i].Propagation() != p {
			t.Errorf("%s: propagation %q, want %q", got[i].Point, got[i].Propagation(), p)
		}
	}
}

func TestParseMountinfoRefuses(t *testing.T) {
	for _, line := range []string{
		"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 ext3 /dev/root rw", // no "-"
		"36 35 98:0 /mnt1 /mnt2 rw - ext3",                             // no source
		"x 35 98:0 / / rw - ext3 /dev/root rw",
		"36 y 98:0 / / rw - ext3 /dev/root rw",
		"36 35 98:0 / / - ext3 /dev/root rw", // the separator where the options belong
	} {
		if _, err := ParseMountinfo(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("%q accepted", line)
		}
	}
}

func TestReadMountinfo(t *testing.T) {
	ms, err := ReadMountinfo()
	if err != nil {
		t.Fatal(err)
	}
	root := false
	for _, m := range ms {
		root = root || m.Point == "/"
	}
	if !root {
		t.Errorf("no / among %d mounts", len(ms))
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n")
	f.Add(`40 22 0:50 / /tmp/a\040b\134c\12 rw shared:7 - tmpfs src rw` + "\n1 2 3 4 5 6 - 7 8\n")
	f.Fuzz(func(t *testing.T, in string) {
		ms, err := ParseMountinfo(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, m := range ms {
			if p := m.Propagation(); p == "" {
				t.Fatalf("%+v: empty propagation", m)
			}
			if strings.Contains(m.Options, " ") || m.FSType == "" || m.Source == "" {
				t.Fatalf("%+v from %q", m, in)
			}
		}
	})
}
