package safefs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
)

// TestReadFileOfLeasedFile: a file under another process's write lease (a pod's lease on a file
// of its own) is unreadable at once, EWOULDBLOCK, with openat2 and with the component walk; the
// open is not retried until the lease breaks (45 s by default).
func TestReadFileOfLeasedFile(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "walk"}[walk], func(t *testing.T) {
			if walk {
				t.Cleanup(safefs.UseWalk())
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "status.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			testutil.HoldFile(t, filepath.Join(dir, "status.json"), testutil.HoldLease)
			d, err := safefs.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			done := make(chan error, 1)
			go func() { _, err := d.ReadFile("status.json", 4096); done <- err }()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("ReadFile of a leased file is still going after 5 s")
			}
			if !errors.Is(err, unix.EWOULDBLOCK) {
				t.Fatalf("ReadFile of a leased file: %v, want EWOULDBLOCK", err)
			}
		})
	}
}
