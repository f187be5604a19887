// Command kubectl-memifnet is the kubectl plugin `kubectl memifnet`: the memif links, ports and
// slots of a cluster running memifnet, and why a link is not up (docs/kubectl.md).
package main

import (
	"os"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
