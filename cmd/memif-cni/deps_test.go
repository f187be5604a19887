package main_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksLittle keeps memif-cni small: every runtime pays its process start on each ADD and DEL,
// and on this VM start-up cost grows with what the binary links in (docs/cni.md, "Latency"). It
// writes port.json through pkg/memif/portspec and must not link the memif data path, nor net/http
// and TLS (the kubelet and API server fallbacks live in memif-cni-podinfo), nor gRPC or
// Kubernetes client modules.
func TestLinksLittle(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	// Spelled in pieces so that a grep for these imports does not find this test.
	banned := []string{
		"github.com/memifnet/memifnet/pkg/" + "memif", // the data path; pkg/memif/portspec is the exception below
		"github.com/memifnet/memifnet/pkg/" + "alloc",
		"github.com/memifnet/memifnet/pkg/" + "socket",
		"net/" + "http", "crypto/" + "tls", "google.golang.org/" + "grpc", "k8s" + ".io/",
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/memifnet/memifnet/pkg/memif/portspec" {
			continue
		}
		for _, b := range banned {
			if b = strings.TrimSuffix(b, "/"); dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("memif-cni links %s", dep)
			}
		}
	}
}
