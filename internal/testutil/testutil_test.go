package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMountsAndUnmountAll(t *testing.T) {
	RequireRoot(t, "tmpfs mounts")
	dir := t.TempDir()
	t.Cleanup(func() { UnmountUnder(t, dir) })
	for _, d := range []string{"a", "c"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(src, at string) {
		t.Helper()
		if err := unix.Mount(src, filepath.Join(dir, at), "tmpfs", 0, "size=64k"); err != nil {
			t.Fatal(err)
		}
	}
	mount("t-a", "a")
	if err := os.Mkdir(filepath.Join(dir, "a", "b b"), 0o755); err != nil {
		t.Fatal(err)
	}
	mount("t-ab", "a/b b") // a space: escaped as \040 in mountinfo
	mount("t-c1", "c")
	mount("t-c2", "c") // stacked
	got, err := Mounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a", "b b"), filepath.Join(dir, "a"), filepath.Join(dir, "c"), filepath.Join(dir, "c")}
	if !slices.Equal(got, want) {
		t.Errorf("Mounts = %q, want %q", got, want)
	}
	if m, ok, err := TopMount(filepath.Join(dir, "c")); err != nil || !ok || m.Source != "t-c2" || m.FSType != "tmpfs" {
		t.Errorf("TopMount = %+v %v %v, want the stacked t-c2", m, ok, err)
	}
	if _, ok, err := TopMount(dir); err != nil || ok {
		t.Errorf("TopMount of an unmounted dir: %v %v", ok, err)
	}
	if err := UnmountAll(dir); err != nil {
		t.Fatal(err)
	}
	if left := MountsUnder(t, dir); len(left) != 0 {
		t.Errorf("left after UnmountAll: %q", left)
	}
}

func TestBuildOnce(t *testing.T) {
	t.Cleanup(RemoveBuilt)
	b := Build{Pkgs: []string{"../../hack/pause"}}
	dir := Built(t, b)
	if st, err := os.Stat(filepath.Join(dir, "pause")); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("no pause binary in %s: %v", dir, err)
	}
	if again := Built(t, b); again != dir {
		t.Errorf("built twice: %s and %s", dir, again)
	}
	if other := Built(t, Build{Tags: []string{"x"}, Pkgs: b.Pkgs}); other == dir {
		t.Errorf("another build (tags) shares %s", dir)
	}
	bad := Build{Pkgs: []string{"./no-such-package"}}
	_, err1 := BuildOnce(bad)
	_, err2 := BuildOnce(bad)
	if err1 == nil || !errors.Is(err2, err1) {
		t.Errorf("a failed build: %v, then %v (want the same error)", err1, err2)
	}
}

func TestRaiseHugepagesEnough(t *testing.T) {
	called := false
	old, now, err := RaiseHugepages(0, func(int) error { called = true; return nil })
	if err != nil || old != now || called {
		t.Errorf("RaiseHugepages(0) = %d, %d, %v (before called: %v): want no change", old, now, err, called)
	}
}
