// Package testutil holds what the project's tests share for the things a test needs from the
// machine: root, hugepages, tools, binaries built once, mounts found and undone. A test that lacks
// one skips with the reason, except under CI=true, where it fails: CI runs as root with
// everything installed (.ci/run), and a skipped proof must not pass there.
//
// Every helper comes in an error-returning form (Mounts, UnmountAll, TopMount, Hugepages,
// RaiseHugepages, BuildOnce, Build.Into) for code without a testing.TB, such as the e2e
// harness in test/e2e/node and test/e2e/cluster, and most in a form that fails or skips t.
// mountinfo is parsed by internal/safefs (ReadMountinfo), the one parser of it; safefs's own
// tests cannot use this package (it imports safefs).
package testutil

import (
	"fmt"
	"os"
	"testing"
)

// CI reports whether the tests run in CI (CI=true), where nothing may skip.
func CI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips the test with the reason, or fails it under CI=true.
func SkipOrFail(t testing.TB, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if CI() {
		t.Fatalf("%s (CI=true: a test that cannot run fails)", msg)
	}
	t.Skipf("skipped: %s (set CI=true to make this a failure)", msg)
}

// Need skips or fails the test (see SkipOrFail) when err, the reason a prerequisite is missing,
// is not nil.
func Need(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		SkipOrFail(t, "%v", err)
	}
}

// RequireRoot skips or fails the test unless it runs as root; why says what needs root.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root: %s", why)
	}
}
