package testutil

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update flag of every test binary that links this package: golden files are
// rewritten from the code instead of compared.
var update = flag.Bool("update", false, "rewrite golden files (testutil.Golden) from the code")

// Golden fails t unless got is the content of file, byte for byte; with -update it writes got to
// file instead. A golden file pins a format others read (a wire format, an exposition): a change
// to it is a change of that format, made with -update and reviewed in the diff.
func Golden(t testing.TB, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (make it with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the output is not %s (if the change is meant, rerun with -update and review the diff):\n%s", file, got)
	}
}
