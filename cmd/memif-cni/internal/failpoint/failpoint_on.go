//go:build failpoints

// Package failpoint lets tests crash the plugin after a chosen step of ADD. In normal builds Hit
// does nothing; build with -tags failpoints to enable it.
package failpoint

import (
	"fmt"
	"os"
)

// Env names the step after which the process dies.
const Env = "MEMIFNET_CNI_FAILPOINT"

// Hit exits the process at once, skipping every deferred cleanup, as a crash or a SIGKILL from
// the runtime's timeout would, when Env names step.
func Hit(step string) {
	if os.Getenv(Env) == step {
		fmt.Fprintf(os.Stderr, "memif-cni: failpoint %s\n", step)
		os.Exit(42)
	}
}
