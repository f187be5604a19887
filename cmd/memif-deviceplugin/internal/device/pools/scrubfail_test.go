package pools

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/internal/testutil"
)

// TestScrubFailureIsErrScrubFailed breaks a unit's scrub for real (the pool's mount covered by
// another file system; the unit's name taken by a directory that is not empty): Scrub fails with
// device.ErrScrubFailed, not ErrWithheld, and the unit is not withheld; once the cause is gone the
// same Scrub makes a new unit file of the unit size.
func TestScrubFailureIsErrScrubFailed(t *testing.T) {
	testutil.NeedHugepages(t, 6)
	const id = "hugepool-n0-000"
	for _, tc := range []struct {
		name     string
		brk, fix func(t *testing.T, p *Provider)
	}{
		{name: "mount covered",
			brk: func(t *testing.T, p *Provider) { must(t, unix.Mount("impostor", p.Dir(), "tmpfs", 0, "size=64k")) },
			fix: func(t *testing.T, p *Provider) { must(t, unix.Unmount(p.Dir(), 0)) }},
		{name: "directory in its place",
			brk: func(t *testing.T, p *Provider) {
				must(t, os.Remove(p.Path(id)))
				must(t, os.Mkdir(p.Path(id), 0o755))
				must(t, os.Mkdir(filepath.Join(p.Path(id), "x"), 0o755))
			},
			fix: func(t *testing.T, p *Provider) { must(t, os.RemoveAll(p.Path(id))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, t.TempDir(), pool(2))
			tc.brk(t, p)
			err := p.Scrub(id)
			if !errors.Is(err, device.ErrScrubFailed) || errors.Is(err, device.ErrWithheld) {
				t.Fatalf("Scrub of a broken unit: %v, want device.ErrScrubFailed", err)
			}
			if w := p.Withheld(); len(w) != 0 {
				t.Errorf("withheld %v after a failed scrub, want none", w)
			}
			tc.fix(t, p)
			if err := p.Scrub(id); err != nil {
				t.Fatalf("Scrub once the cause is gone: %v", err)
			}
			if err := p.Check(id); err != nil {
				t.Fatalf("the unit after the scrub: %v", err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
