package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/memifnet/memifnet/internal/testutil"
)

const calico = `{"name":"k8s-pod-network","cniVersion":"1.0.0","plugins":[{"type":"calico","ipam":{"type":"calico-ipam"}},{"type":"portmap","capabilities":{"portMappings":true}}]}`

func TestMain(m *testing.M) { testutil.Main(m) }

// build builds memif-cni-install once per test run.
func build(t *testing.T) string {
	t.Helper()
	return filepath.Join(testutil.Built(t, testutil.Build{Pkgs: []string{"."}}), "memif-cni-install")
}

func chainTypes(t *testing.T, file string) string {
	t.Helper()
	l, err := libcni.ConfListFromFile(file)
	if err != nil {
		return "error: " + err.Error()
	}
	var ts []string
	for _, p := range l.Plugins {
		ts = append(ts, p.Network.Type)
	}
	return strings.Join(ts, ",")
}

// The DaemonSet's sidecar: install the binary, chain into the primary conflist, put the entry
// back when the primary plugin rewrites its file, and take it out on SIGTERM.
func TestSidecarInstallsKeepsAndUninstalls(t *testing.T) {
	bin := build(t)
	host := t.TempDir()
	binDir, confDir := filepath.Join(host, "opt/cni/bin"), filepath.Join(host, "etc/cni/net.d")
	os.MkdirAll(confDir, 0o755)
	src, helperSrc := filepath.Join(host, "memif-cni-source"), filepath.Join(host, "memif-cni-podinfo")
	os.WriteFile(src, []byte("#!/bin/sh\necho fake memif-cni\n"), 0o755)
	os.WriteFile(helperSrc, []byte("#!/bin/sh\necho fake helper\n"), 0o755)
	primary := filepath.Join(confDir, "10-calico.conflist")
	os.WriteFile(primary, []byte(calico), 0o644)

	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--source", src, "--cni-bin-dir", binDir, "--cni-conf-dir", confDir,
		"--chain", "--wait", "--check-interval", "100ms")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	testutil.Eventually(t, 10*time.Second, "memif-cni chained", func() bool { return chainTypes(t, primary) == "calico,portmap,memif-cni" })
	got, err := os.ReadFile(filepath.Join(binDir, "memif-cni"))
	if err != nil || !bytes.Contains(got, []byte("fake memif-cni")) {
		t.Fatalf("binary not installed: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(binDir, "memif-cni")); fi.Mode().Perm() != 0o755 {
		t.Errorf("binary mode %v", fi.Mode())
	}
	if got, err := os.ReadFile(filepath.Join(binDir, "memif-cni-podinfo")); err != nil || !bytes.Contains(got, []byte("fake helper")) {
		t.Fatalf("helper not installed: %v", err)
	}

	// The primary plugin rewrites its configuration (an upgrade): the entry comes back.
	os.WriteFile(primary, []byte(calico), 0o644)
	testutil.Eventually(t, 10*time.Second, "memif-cni chained again after the rewrite", func() bool { return chainTypes(t, primary) == "calico,portmap,memif-cni" })

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit on SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after SIGTERM\n%s", stderr.String())
	}
	if got := chainTypes(t, primary); got != "calico,portmap" {
		t.Errorf("after SIGTERM the chain is %s, want calico,portmap", got)
	}
	if _, err := os.Stat(filepath.Join(binDir, "memif-cni")); err != nil {
		t.Errorf("the binary must stay for DELs of pods still running: %v", err)
	}
	if !strings.Contains(stderr.String(), "took memif-cni out") {
		t.Errorf("log lacks the uninstall:\n%s", stderr.String())
	}
}

func TestUninstallRemovesEntryAndBinary(t *testing.T) {
	bin := build(t)
	host := t.TempDir()
	binDir, confDir := filepath.Join(host, "bin"), filepath.Join(host, "net.d")
	os.MkdirAll(binDir, 0o755)
	os.MkdirAll(confDir, 0o755)
	os.WriteFile(filepath.Join(binDir, "memif-cni"), []byte("x"), 0o755)
	os.WriteFile(filepath.Join(binDir, "memif-cni-podinfo"), []byte("x"), 0o755)
	primary := filepath.Join(confDir, "10-calico.conflist")
	os.WriteFile(primary, []byte(strings.Replace(calico, `]}`, `,{"type":"memif-cni"}]}`, 1)), 0o644)
	out, err := exec.Command(bin, "--cni-bin-dir", binDir, "--cni-conf-dir", confDir, "--uninstall", "--remove-binary").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := chainTypes(t, primary); got != "calico,portmap" {
		t.Errorf("chain %s", got)
	}
	for _, b := range []string{"memif-cni", "memif-cni-podinfo"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", b, err)
		}
	}
}

// Without a primary configuration the one-shot install fails loudly (the init container
// restarts until the primary network plugin has written one).
func TestChainWithoutPrimaryFails(t *testing.T) {
	bin := build(t)
	host := t.TempDir()
	src := filepath.Join(host, "src")
	os.WriteFile(src, []byte("x"), 0o755)
	os.MkdirAll(filepath.Join(host, "net.d"), 0o755)
	out, err := exec.Command(bin, "--source", src, "--helper-source", src, "--cni-bin-dir", filepath.Join(host, "bin"),
		"--cni-conf-dir", filepath.Join(host, "net.d"), "--chain").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no CNI configuration") {
		t.Errorf("want a failure naming the missing configuration; got %v\n%s", err, out)
	}
}

// A node where Multus's configuration is first by name (Multus installed as the primary plugin,
// thin or thick, as on OpenShift): the installer does not chain into it, fails naming the file
// and the way that works (a NetworkAttachmentDefinition), and leaves every file as it was.
func TestChainRefusesMultusPrimary(t *testing.T) {
	bin := build(t)
	for typ, conf := range map[string]string{
		"multus":      `{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus","kubeconfig":"/etc/cni/net.d/multus.d/multus.kubeconfig","delegates":[{"cniVersion":"0.3.1","name":"k8s-pod-network","plugins":[{"type":"calico"}]}]}`,
		"multus-shim": `{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus-shim","socketDir":"/host/run/multus/"}`,
	} {
		t.Run(typ, func(t *testing.T) {
			host := t.TempDir()
			src := filepath.Join(host, "src")
			os.WriteFile(src, []byte("x"), 0o755)
			confDir := filepath.Join(host, "net.d")
			os.MkdirAll(confDir, 0o755)
			files := map[string]string{"00-multus.conf": conf, "10-calico.conflist": calico}
			for n, c := range files {
				os.WriteFile(filepath.Join(confDir, n), []byte(c), 0o644)
			}
			out, err := exec.Command(bin, "--source", src, "--helper-source", src, "--cni-bin-dir", filepath.Join(host, "bin"),
				"--cni-conf-dir", confDir, "--chain").CombinedOutput()
			if err == nil || !strings.Contains(string(out), "00-multus.conf is Multus's configuration") ||
				!strings.Contains(string(out), `\"`+typ+`\"`) || !strings.Contains(string(out), "NetworkAttachmentDefinition") {
				t.Errorf("want a failure naming Multus's file, its type and the NAD; got %v\n%s", err, out)
			}
			ents, _ := os.ReadDir(confDir)
			if len(ents) != len(files) {
				t.Errorf("conf dir holds %d entries, want the %d it had", len(ents), len(files))
			}
			for n, c := range files {
				if b, err := os.ReadFile(filepath.Join(confDir, n)); err != nil || string(b) != c {
					t.Errorf("%s changed: %q %v", n, b, err)
				}
			}
		})
	}
}
