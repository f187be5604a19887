package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
)

const testVersion = "v0.0.1-test"

// The release is built once (lazily, by the first test that needs it) into a directory removed
// after the tests: building 16 binaries is the expensive part. -short skips those tests.
var (
	relOnce sync.Once
	relDir  string
	relErr  error
	tmpRoot string
)

func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	if tmpRoot, err = os.MkdirTemp("", "memifnet-release-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// releaseRun runs the whole release (with the arm64 vet) as `make release` does.
func releaseRun(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the release builds every command for four platforms")
	}
	relOnce.Do(func() {
		relDir, relErr = release(config{Version: testVersion, Registry: "registry.example/mn", Root: "../..",
			Out: filepath.Join(tmpRoot, "a"), URLBase: "https://dl.example/memifnet", Vet: true})
	})
	if relErr != nil {
		t.Fatalf("release: %v", relErr)
	}
	return relDir
}

// commands are the main packages under cmd/, read from the tree (not from the release code).
func commands(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join("../../cmd", e.Name(), "main.go")); err == nil {
			cmds = append(cmds, e.Name())
		}
	}
	if len(cmds) < 7 {
		t.Fatalf("only %v under cmd/", cmds)
	}
	return cmds
}

// pinnedRef is the IMAGE file: the repository at the index digest.
func pinnedRef(t *testing.T, dir string) (ref string, digest v1.Hash) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "IMAGE"))
	if err != nil {
		t.Fatal(err)
	}
	ref = strings.TrimSpace(string(b))
	repo, d, ok := strings.Cut(ref, "@")
	if !ok || repo != "registry.example/mn/memifnet" {
		t.Fatalf("IMAGE %q", ref)
	}
	if digest, err = v1.NewHash(d); err != nil {
		t.Fatal(err)
	}
	return ref, digest
}

// TestImageIndex opens the OCI archive as a registry client would see it: one index tagged with
// the version, whose digest is the pinned one, with linux/amd64 and linux/arm64 images that each
// hold every command as an executable for their architecture.
func TestImageIndex(t *testing.T) {
	dir := releaseRun(t)
	_, digest := pinnedRef(t, dir)
	lp := t.TempDir()
	untar(t, filepath.Join(dir, imageArchive(testVersion)), lp)
	top, err := layout.ImageIndexFromPath(lp)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest != digest || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("index.json %+v, want one index %s tagged %s", tm.Manifests, digest, testVersion)
	}
	idx, err := top.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var seen []string
	for _, d := range im.Manifests {
		seen = append(seen, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != d.Platform.OS || cfg.Architecture != d.Platform.Architecture {
			t.Errorf("%s: config says %s/%s", d.Digest, cfg.OS, cfg.Architecture)
		}
		files := imageFiles(t, img)
		for _, c := range commands(t) {
			data, ok := files["usr/local/bin/"+c]
			if !ok {
				t.Errorf("linux/%s image: no /usr/local/bin/%s", cfg.Architecture, c)
				continue
			}
			e, err := elf.NewFile(bytes.NewReader(data))
			if err != nil || e.Machine != machines[cfg.Architecture] {
				t.Errorf("linux/%s image: %s is not an %v ELF (%v)", cfg.Architecture, c, machines[cfg.Architecture], err)
			}
		}
	}
	sort.Strings(seen)
	if strings.Join(seen, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("index platforms %v, want linux/amd64 linux/arm64", seen)
	}
}

// imageFiles reads the image's flattened filesystem (regular files).
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		readTar(t, rc, func(h *tar.Header, data []byte) { files[h.Name] = data })
		rc.Close()
	}
	return files
}

func readTar(t *testing.T, r io.Reader, fn func(*tar.Header, []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			fn(h, data)
		}
	}
}

func untar(t *testing.T, archive, dst string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readTar(t, f, func(h *tar.Header, data []byte) {
		p := filepath.Join(dst, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBundle parses each overlay's YAML into Kubernetes objects and checks every container and
// init container of the workloads runs the image pinned by the index digest.
func TestBundle(t *testing.T) {
	dir := releaseRun(t)
	ref, _ := pinnedRef(t, dir)
	for _, o := range overlays {
		b, err := os.ReadFile(filepath.Join(dir, bundleFile(o)))
		if err != nil {
			t.Fatal(err)
		}
		dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		var objs, pinned int
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			if u.Object == nil {
				continue
			}
			if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
				t.Errorf("%s: object without apiVersion/kind/name: %v", o, u.Object)
			}
			objs++
			for _, c := range podContainers(t, &u) {
				if c.Image != ref {
					t.Errorf("%s: %s/%s container %s image %q, want %q", o, u.GetKind(), u.GetName(), c.Name, c.Image, ref)
				}
				pinned++
			}
		}
		if objs < 5 || pinned < 2 {
			t.Errorf("%s: %d objects, %d containers: not an install", o, objs, pinned)
		}
	}
}

// podContainers are a DaemonSet's or Deployment's containers and init containers (typed
// conversion: a malformed workload fails here).
func podContainers(t *testing.T, u *unstructured.Unstructured) []corev1.Container {
	t.Helper()
	var spec corev1.PodSpec
	switch u.GetKind() {
	case "DaemonSet":
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &ds, true); err != nil {
			t.Fatalf("DaemonSet %s: %v", u.GetName(), err)
		}
		spec = ds.Spec.Template.Spec
	case "Deployment":
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &d, true); err != nil {
			t.Fatalf("Deployment %s: %v", u.GetName(), err)
		}
		spec = d.Spec.Template.Spec
	default:
		return nil
	}
	return append(spec.InitContainers, spec.Containers...)
}

// readSums parses SHA256SUMS.
func readSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, sumsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

// TestSums verifies SHA256SUMS covers every other file of the release and each sum matches.
func TestSums(t *testing.T) {
	dir := releaseRun(t)
	sums := readSums(t, dir)
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(p) == sumsFile {
			return err
		}
		n++
		rel, _ := filepath.Rel(dir, p)
		got, err := fileSHA256(p)
		if err != nil {
			return err
		}
		if want, ok := sums[filepath.ToSlash(rel)]; !ok || want != got {
			t.Errorf("%s: sum %s, SHA256SUMS says %q", rel, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(sums) || n < 4+len(overlays)+len(pluginPlatforms) {
		t.Errorf("%d files, %d sums", n, len(sums))
	}
}
