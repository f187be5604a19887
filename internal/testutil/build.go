package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Build is a go build of main packages as the Makefile and the image build them: static
// (CGO_ENABLED=0: a CNI binary is copied onto hosts whose libc is unknown, and starts 3-4 ms
// faster) and -trimpath.
type Build struct {
	Dir  string   // where go build runs ("": the current directory, i.e. a test's package)
	Tags []string // build tags
	Pkgs []string // main packages, relative to Dir or as import paths
}

// Into builds b's packages into out, each binary named after its package's directory.
func (b Build) Into(ctx context.Context, out string) error {
	args := []string{"build", "-trimpath", "-o", strings.TrimSuffix(out, "/") + "/"}
	if len(b.Tags) > 0 {
		args = append(args, "-tags", strings.Join(b.Tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, b.Pkgs...)...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
	return nil
}

func (b Build) key() string {
	return b.Dir + "\x00" + strings.Join(b.Tags, ",") + "\x00" + strings.Join(b.Pkgs, "\x00")
}

// built holds the builds of this test process: each one at most once, in a directory of its own
// under root.
var built struct {
	mu   sync.Mutex
	root string
	dirs map[string]*builtDir
}

type builtDir struct {
	once sync.Once
	dir  string
	err  error
}

// Built builds b once per test process (t.TempDir would be gone after the first test) and
// returns the directory holding its binaries; every test asking for the same build shares it,
// and its error. The package's TestMain is Main, which removes them at the end.
func Built(t testing.TB, b Build) string {
	t.Helper()
	dir, err := BuildOnce(b)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// BuildOnce is Built for code without a testing.TB.
func BuildOnce(b Build) (string, error) {
	built.mu.Lock()
	if built.dirs == nil {
		built.dirs = map[string]*builtDir{}
	}
	d := built.dirs[b.key()]
	if d == nil {
		d = &builtDir{}
		built.dirs[b.key()] = d
	}
	if built.root == "" {
		root, err := os.MkdirTemp("", "memifnet-test-bin-")
		if err != nil {
			built.mu.Unlock()
			return "", err
		}
		built.root = root
	}
	root := built.root
	built.mu.Unlock()
	d.once.Do(func() {
		if d.dir, d.err = os.MkdirTemp(root, "build-"); d.err == nil {
			d.err = b.Into(context.Background(), d.dir)
		}
	})
	return d.dir, d.err
}

// RemoveBuilt removes what Built and BuildOnce built.
func RemoveBuilt() {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.root != "" {
		_ = os.RemoveAll(built.root)
	}
	built.root, built.dirs = "", nil
}

// Main is the TestMain of a package whose tests use Built: it runs the tests, removes what they
// built and exits with their result. Such a package's TestMain is `testutil.Main(m)`.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBuilt()
	os.Exit(code)
}
