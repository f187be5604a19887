package main_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksLittle keeps memif-cni small: every runtime pays its process start on each ADD and DEL,
// and on this VM start-up cost grows with what the binary links in (docs/cni.md, "Latency"). It
// writes port.json through pkg/memif/portspec and must not link the memif data path, nor any
// Kubernetes module but the kubelet's PodResources API types (the kubelet and API server
// fallbacks, with client-go, live in memif-cni-podinfo). gRPC is linked for PodResources.
func TestLinksLittle(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	// Spelled in pieces so that a grep for these imports does not find this test.
	allowed := map[string]bool{
		"github.com/memifnet/memifnet/pkg/memif/portspec": true,
		"k8s" + ".io/kubelet/pkg/apis/podresources/v1":    true,
	}
	banned := []string{
		"github.com/memifnet/memifnet/pkg/" + "memif", // the data path; pkg/memif/portspec is allowed
		"github.com/memifnet/memifnet/pkg/" + "alloc",
		"github.com/memifnet/memifnet/pkg/" + "socket",
		"k8s" + ".io/",
	}
	linked := false
	for _, dep := range strings.Fields(string(out)) {
		if allowed[dep] {
			linked = true
			continue
		}
		for _, b := range banned {
			if b = strings.TrimSuffix(b, "/"); dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("memif-cni links %s", dep)
			}
		}
	}
	if !linked {
		t.Errorf("go list -deps names none of %v: is its output what this test expects?", allowed)
	}
}
