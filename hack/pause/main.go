// Command pause is the pod sandbox image's process for the e2e tests and the demo (no registry is
// reachable there, so the usual registry.k8s.io/pause cannot be pulled): it blocks until SIGTERM
// or SIGINT and exits 0.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
