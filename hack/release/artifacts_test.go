package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"debug/macho"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSBOM parses the SPDX document: memifnet at the release version, the standard library and
// modules the binaries really link (gRPC for the device plugin, the CNI library for memif-cni,
// client-go for the plugin), each relationship naming a package of the document.
func TestSBOM(t *testing.T) {
	dir := releaseRun(t)
	b, err := os.ReadFile(filepath.Join(dir, sbomFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.CreationInfo.Created == "" {
		t.Errorf("SBOM header %+v", doc)
	}
	ids := map[string]bool{"SPDXRef-DOCUMENT": true}
	versions := map[string]string{}
	for _, p := range doc.Packages {
		if ids[p.SPDXID] {
			t.Errorf("SPDX ID %s twice", p.SPDXID)
		}
		ids[p.SPDXID] = true
		versions[p.Name] = p.VersionInfo
	}
	for _, r := range doc.Relationships {
		if !ids[r.Element] || !ids[r.Related] {
			t.Errorf("relationship %+v names an unknown element", r)
		}
	}
	if versions[mainModule] != testVersion || !strings.HasPrefix(versions["stdlib"], "go1.") {
		t.Errorf("memifnet %q, stdlib %q", versions[mainModule], versions["stdlib"])
	}
	for _, m := range []string{"google.golang.org/grpc", "github.com/containernetworking/cni", "k8s.io/client-go", "golang.org/x/sys"} {
		if !strings.HasPrefix(versions[m], "v") {
			t.Errorf("SBOM: no %s (got %q)", m, versions[m])
		}
	}
	// Test-only and tool modules are in go.mod but in no binary.
	if _, ok := versions["honnef.co/go/tools"]; ok {
		t.Error("SBOM lists staticcheck, which no binary links")
	}
}

// TestKrewManifest checks the plugin manifest against the archives: one platform each, the
// sha256 of the archive it downloads, and an archive holding kubectl-memifnet built for it.
func TestKrewManifest(t *testing.T) {
	dir := releaseRun(t)
	b, err := os.ReadFile(filepath.Join(dir, krewFile))
	if err != nil {
		t.Fatal(err)
	}
	var k krewPlugin
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatal(err)
	}
	if k.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || k.Kind != "Plugin" || k.Metadata.Name != "memifnet" || k.Spec.Version != testVersion {
		t.Errorf("manifest header %+v", k)
	}
	if len(k.Spec.Platforms) != len(pluginPlatforms) {
		t.Fatalf("%d platforms, want %d", len(k.Spec.Platforms), len(pluginPlatforms))
	}
	for _, p := range k.Spec.Platforms {
		pl := platform{p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]}
		name := pluginArchive(testVersion, pl)
		if p.URI != "https://dl.example/memifnet/"+testVersion+"/"+name || p.Bin != pluginCmd {
			t.Errorf("%s: uri %s bin %s", pl, p.URI, p.Bin)
		}
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if p.SHA256 != sum {
			t.Errorf("%s: manifest sha256 %s, archive %s", pl, p.SHA256, sum)
		}
		checkPluginArchive(t, filepath.Join(dir, name), pl)
	}
}

func checkPluginArchive(t *testing.T, archive string, p platform) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var bin []byte
	readTar(t, zr, func(h *tar.Header, data []byte) {
		if h.Name == pluginCmd && h.Mode&0o111 != 0 {
			bin = data
		}
	})
	switch p.OS {
	case "linux":
		e, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil || e.Machine != elfMachines[p.Arch] {
			t.Errorf("%s: kubectl-memifnet not an %v ELF executable (%v)", p, elfMachines[p.Arch], err)
		}
	case "darwin":
		m, err := macho.NewFile(bytes.NewReader(bin))
		if err != nil || m.Cpu != machoCPUs[p.Arch] {
			t.Errorf("%s: kubectl-memifnet not a %v Mach-O executable (%v)", p, machoCPUs[p.Arch], err)
		}
	default:
		t.Errorf("unexpected platform %s", p)
	}
}

// TestCheckExecutableRefusesOtherArch: the header check is what stops a cross build that
// produced the wrong machine's binary; give it one (this test binary, built for the host).
func TestCheckExecutableRefusesOtherArch(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the test binary is not an ELF here")
	}
	f, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host := platform{"linux", runtime.GOARCH}
	if err := checkExecutable(f, host); err != nil {
		t.Fatalf("host binary refused for %s: %v", host, err)
	}
	other := platform{"linux", "arm64"}
	if host.Arch == "arm64" {
		other.Arch = "amd64"
	}
	if err := checkExecutable(f, other); err == nil {
		t.Errorf("%s binary accepted as %s", host, other)
	}
	if err := checkExecutable(f, platform{"darwin", host.Arch}); err == nil {
		t.Error("ELF binary accepted as darwin")
	}
}

// TestReproducible builds the release a second time: the same commit gives the same image index
// digest (so the bundle's pin is a property of the source) and byte-identical files (the same
// SHA256SUMS). It doubles the test's build time (~3 min of links on the shared CI machine), so
// it runs when MEMIFNET_RELEASE_REPRO=1.
func TestReproducible(t *testing.T) {
	if os.Getenv("MEMIFNET_RELEASE_REPRO") != "1" {
		t.Skip("set MEMIFNET_RELEASE_REPRO=1 to build the release twice and compare")
	}
	dir := releaseRun(t)
	again, err := release(config{Version: testVersion, Registry: "registry.example/mn", Root: "../..",
		Out: filepath.Join(tmpRoot, "b"), URLBase: "https://dl.example/memifnet"})
	if err != nil {
		t.Fatal(err)
	}
	a, err1 := os.ReadFile(filepath.Join(dir, "IMAGE"))
	b, err2 := os.ReadFile(filepath.Join(again, "IMAGE"))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Errorf("index digest differs between two runs (%v %v): %s vs %s", err1, err2, a, b)
	}
	sa, sb := readSums(t, dir), readSums(t, again)
	for f, s := range sa {
		if sb[f] != s {
			t.Errorf("%s differs between the runs", f)
		}
	}
}

func TestVersionRefused(t *testing.T) {
	for _, v := range []string{"", "0.1.0", "v1", "v1.2", "dev", "v01.2.3"} {
		if err := run([]string{"-version", v, "-o", t.TempDir()}); err == nil {
			t.Errorf("version %q accepted", v)
		}
	}
}

// TestChartHook: without charts/memifnet the release has no chart; the project's chart is
// packaged under memifnet/ as Helm lays a chart archive out, with the release's version and its
// image pinned by digest, the dashboard's content in place of the symlink to it.
func TestChartHook(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	c := config{Root: t.TempDir(), Version: "v1.2.3"}
	if err := packageChart(c, dir, "example.org/memifnet", digest); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("no chart, yet %v", ents)
	}
	c.Root = "../.."
	if err := packageChart(c, dir, "example.org/memifnet", digest); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "memifnet-1.2.3.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	readTar(t, zr, func(h *tar.Header, b []byte) { got[h.Name] = string(b) })
	dashboard, err := os.ReadFile("../../manifests/dashboards/memifnet.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"memifnet/Chart.yaml":               {"\nversion: \"1.2.3\"\n", "\nappVersion: \"v1.2.3\"\n"},
		"memifnet/values.yaml":              {"  repository: \"example.org/memifnet\"\n", "  digest: \"" + digest + "\"\n"},
		"memifnet/templates/daemonset.yaml": {"kind: DaemonSet"},
		"memifnet/files/memifnet.json":      {string(dashboard)},
	} {
		for _, w := range want {
			if !strings.Contains(got[name], w) {
				t.Errorf("%s in the chart archive lacks %q", name, w)
			}
		}
	}
	if err := os.Remove(filepath.Join(dir, "memifnet-1.2.3.tgz")); err != nil {
		t.Fatal(err)
	}
	// A chart whose values cannot carry the digest is refused, not packaged unpinned.
	if _, err := setField([]byte("image:\n  tag: \"\"\n"), "  digest", digest); err == nil {
		t.Error("values without a digest line: no error")
	}
}
