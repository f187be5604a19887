package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Where `make image` writes the memifnet image and the pause image (hack/e2e.mk's E2E_OUT).
const (
	ImageTarball = "hack/_out/memifnet-image.tar"
	PauseTarball = "hack/_out/pause-image.tar"
	DPDKTarball  = "hack/_out/dpdk-image.tar" // `make image-dpdk`, where DPDK is installed
)

// Build builds what a cluster runs, or reuses what is built: the Kubernetes multi-call binary
// (hack/build-kube.sh); containerd v2, Multus's thin plugin, its thick daemon and shim, and the
// helm CLI (hack/build-tools.sh); and the memifnet image (`make image`). The two module builds
// run side by side (one links while the other compiles); their progress goes to progress.
func Build(ctx context.Context, repo string, progress io.Writer) (Inputs, error) {
	var (
		in   Inputs
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	pw := &lockedWriter{w: progress}
	script := func(dst *string, args ...string) {
		out, err := runScript(ctx, repo, pw, args...)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		*dst = out
	}
	wg.Add(2)
	go func() { defer wg.Done(); script(&in.KubeDir, "hack/build-kube.sh") }()
	go func() {
		defer wg.Done()
		script(&in.ContainerdDir, "hack/build-tools.sh", "containerd")
		script(&in.MultusDir, "hack/build-tools.sh", "multus")
		script(&in.MultusThickDir, "hack/build-tools.sh", "multus-thick")
		// Built here for the others that use it (manifests' chart tests, tier 3's Helm step,
		// both through the same script): `make test` runs this build before the unit tests.
		var helmDir string
		script(&helmDir, "hack/build-tools.sh", "helm")
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return in, err
	}
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "image")
	cmd.Dir = repo
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Run(); err != nil {
		return in, fmt.Errorf("make image: %w", err)
	}
	in.Image = filepath.Join(repo, ImageTarball)
	in.PauseImage = filepath.Join(repo, PauseTarball)
	cmd = exec.CommandContext(ctx, "make", "--no-print-directory", "image-dpdk")
	cmd.Dir = repo
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Run(); err != nil {
		return in, fmt.Errorf("make image-dpdk: %w", err)
	}
	if _, err := os.Stat(filepath.Join(repo, DPDKTarball)); err == nil {
		in.DPDKImage = filepath.Join(repo, DPDKTarball)
	}
	return in, nil
}

// runScript runs a build script from the repository; its last stdout line is its output
// directory, everything else is progress.
func runScript(ctx context.Context, repo string, progress io.Writer, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(repo, args[0]), args[1:]...)
	cmd.Dir = repo
	cmd.Stdout, cmd.Stderr = &out, progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir := lines[len(lines)-1]
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s printed %q, not a directory", strings.Join(args, " "), dir)
	}
	return dir, nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
