//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// dpdk: DPDK apps get their memif port from the ready config with no glue (docs/apps.md). The
// DPDK image (`make image-dpdk`: the node's Debian dpdk-testpmd) runs memif-testpmd, which starts
// testpmd from the slot's dpdk.args and dpdk.app-args alone, io forwarding, --no-huge; the Go
// end, memif-perf --verify, is the verdict (testpmd's exit status and summary are not, with DPDK
// 22.11's net_memif), and both pods must end Succeeded:
//   - Link/DPDKServer: examples/dpdk-link.yaml as shipped (the DPDK pod serves);
//   - Link/DPDKClient: the same with the roles swapped;
//   - HostPort/DPDKPod: the DPDK pod on a host port, the node's data plane memif-perf started
//     from nothing but the host side's <slot>.env (sh: set -a; . file);
//   - HostPort/DPDKNode: a Go pod on a host port, the node's data plane testpmd started from the
//     host side's <slot>.dpdk.args (memif-testpmd --args).
func (x *tier3) dpdk(ctx context.Context, t *testing.T) {
	if x.c.In.DPDKImage == "" {
		testutil.SkipOrFail(t, "no DPDK image: `make image-dpdk` needs dpdk-testpmd (apt-get install dpdk-dev)")
	}
	b, err := os.ReadFile(filepath.Join(x.repo, "manifests", "examples", "dpdk-link.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := string(b)
	t.Run("Link/DPDKServer", func(t *testing.T) { x.dpdkLink(ctx, t, example) })
	swapped := strings.NewReplacer(`"role":"server"`, `"role":"client"`, `"role":"client"`, `"role":"server"`).Replace(example)
	t.Run("Link/DPDKClient", func(t *testing.T) { x.dpdkLink(ctx, t, swapped) })
	dpdkPod, _, _ := strings.Cut(example, "\n---\n")
	t.Run("HostPort/DPDKPod", func(t *testing.T) { x.dpdkHostPod(ctx, t, dpdkPod) })
	t.Run("HostPort/DPDKNode", func(t *testing.T) { x.dpdkHostNode(ctx, t) })
}

// dpdkLink applies the link example (as given), waits for both pods to end Succeeded, checks the
// Go side's verified traffic and that testpmd ran on the slot's dpdk.args.
func (x *tier3) dpdkLink(ctx context.Context, t *testing.T, manifest string) {
	x.kubectlIn(ctx, t, manifest, "apply", "-f", "-")
	defer x.dpdkDelete(ctx, t, manifest)
	defer x.dpdkLogOnFailure(ctx, t, "memif-dpdk")
	args := linkSlotArgs(ctx, t, "dpdk", "dpdk-link") // gone with the pod's sandbox (CNI DEL)
	x.podSucceeded(ctx, t, "default", "memif-dpdk-peer", 3*time.Minute)
	sum := x.verified(ctx, t, "default", "memif-dpdk-peer")
	if sum["rx_pkts"] == 0 {
		t.Fatalf("memif-dpdk-peer got nothing back from testpmd")
	}
	x.podSucceeded(ctx, t, "default", "memif-dpdk", time.Minute)
	x.testpmdRan(ctx, t, "memif-dpdk", args)
}

// dpdkLogOnFailure shows the end of the DPDK pod's log (testpmd's counters, its forward
// statistics) when the step failed.
func (x *tier3) dpdkLogOnFailure(ctx context.Context, t *testing.T, pod string) {
	if t.Failed() {
		t.Logf("%s: kubectl logs (tail):\n%s", pod, tail(x.logs(ctx, "default", pod), 60))
	}
}

// dpdkDelete deletes a step's pods and waits until their attachments are gone.
func (x *tier3) dpdkDelete(ctx context.Context, t *testing.T, manifest string) {
	x.kubectlIn(ctx, t, manifest, "delete", "-f", "-", "--wait=true")
	x.noLeftovers(ctx, t, "after deleting the DPDK step's pods")
}

// testpmdRan checks the DPDK pod's log: testpmd started from the ready config of its slot (args:
// the slot's dpdk.args as read on the node, word for word on the command line), the link came
// up, the pod ended because the peer left, and testpmd forwarded packets.
func (x *tier3) testpmdRan(ctx context.Context, t *testing.T, pod, args string) {
	t.Helper()
	log := x.logs(ctx, "default", pod)
	var cmdline string
	for l := range strings.Lines(log) {
		if strings.HasPrefix(l, "memif-testpmd: dpdk-testpmd ") {
			cmdline = l
			break
		}
	}
	if !strings.Contains(cmdline, " "+strings.TrimSpace(args)+" ") {
		t.Fatalf("%s: testpmd's command line %q does not hold the slot's dpdk.args %q", pod, cmdline, args)
	}
	last := lastLine(log)
	if !strings.Contains(log, "memif-testpmd: link up") || !strings.Contains(last, "peer_left=true") ||
		!strings.Contains(last, "exit=0") || strings.Contains(last, "tx_pkts=0 ") {
		t.Fatalf("%s: want link up, the peer left, packets forwarded; log tail:\n%s", pod, tail(log, 30))
	}
	x.logf("dpdk: %s: %s", pod, last)
}

// linkSlotArgs waits for the dpdk.args of the slot (on the node) whose port.json is the port
// name of link, and returns it.
func linkSlotArgs(ctx context.Context, t *testing.T, name, link string) string {
	t.Helper()
	var args string
	err := node.Poll(ctx, time.Minute, "the slot of port "+name+" of link "+link, func() (bool, error) {
		files, _ := filepath.Glob(filepath.Join(t3StateDir, "sockets", "*", "port.json"))
		for _, f := range files {
			var spec portspec.PortSpec
			if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &spec) == nil && spec.Name == name && spec.Link == link {
				b, err := os.ReadFile(filepath.Join(filepath.Dir(f), "dpdk.args"))
				args = string(b)
				return err == nil, err
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// dpdkHostPod: the DPDK pod on a host port (the pod is the client); the node's data plane is
// memif-perf started from the host side's <slot>.env by sh, and verifies what testpmd echoes.
func (x *tier3) dpdkHostPod(ctx context.Context, t *testing.T, dpdkPod string) {
	manifest := strings.Replace(dpdkPod, `[{"name":"dpdk","link":"dpdk-link","role":"server"}]`, `[{"name":"vswitch","peer":"host"}]`, 1)
	if manifest == dpdkPod {
		t.Fatal("dpdk-link.yaml's DPDK pod has no link port to turn into a host port")
	}
	x.kubectlIn(ctx, t, manifest, "apply", "-f", "-")
	defer x.dpdkDelete(ctx, t, manifest)
	defer x.dpdkLogOnFailure(ctx, t, "memif-dpdk")
	base := hostSideBase(ctx, t, "memif-dpdk")
	args := waitFile(ctx, t, filepath.Join(t3StateDir, "sockets", filepath.Base(base), "dpdk.args"))
	script := `umask 0 && set -a && . "$0" && set +a && exec "$1" --role "$MEMIF_ROLE" --socket "$MEMIF_SOCKET" ` +
		`--id "$MEMIF_ID" --secret "$MEMIF_SECRET" --queues "$MEMIF_QUEUES" --ring-size "$MEMIF_RING_SIZE" ` +
		`--buffer-size "$MEMIF_BUFFER_SIZE" --mode txrx --verify --size 1500 --duration 10s --connect-timeout 2m`
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", script, base+".env",
		filepath.Join(x.repo, "hack", "_out", "bin", "memif-perf")).CombinedOutput()
	sum, ok := node.Summary(string(out))
	if err != nil || !ok || sum["verify_errors"] != 0 || sum["rx_pkts"] == 0 || !strings.Contains(string(out), "corrupt=0 lost=0 late=0") {
		t.Fatalf("node data plane (memif-perf from %s.env): %v\n%s", base, err, out)
	}
	x.logf("dpdk: node's memif-perf from %s.env: %s", filepath.Base(base), summaryLine(string(out)))
	x.podSucceeded(ctx, t, "default", "memif-dpdk", time.Minute)
	x.testpmdRan(ctx, t, "memif-dpdk", args)
}

// dpdkHostNode: a Go pod on a host port; the node's data plane is testpmd started from the host
// side's <slot>.dpdk.args and <slot>.dpdk.app-args (memif-testpmd --args), echoing.
func (x *tier3) dpdkHostNode(ctx context.Context, t *testing.T) {
	manifest := strings.Replace(perfPod("memif-dpdk-host", "vswitch", "unused", "--mode=txrx", "--verify", "--size=1500",
		"--duration=10s", "--connect-timeout=2m"), `"link":"unused"`, `"peer":"host"`, 1)
	x.kubectlIn(ctx, t, manifest, "apply", "-f", "-")
	defer x.dpdkDelete(ctx, t, manifest)
	base := hostSideBase(ctx, t, "memif-dpdk-host")
	hostArgs := waitFile(ctx, t, base+".dpdk.args") // gone at CNI DEL
	prefix := "memif-e2e-t3-" + filepath.Base(base)
	// EAL's runtime directory as root: /var/run/dpdk/<prefix>, and its parent if EAL made it
	if _, err := os.Stat("/var/run/dpdk"); err != nil {
		defer os.Remove("/var/run/dpdk") // only if empty: another DPDK process may use it now
	}
	defer os.RemoveAll(filepath.Join("/var/run/dpdk", prefix))
	var log bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `umask 0 && exec "$0" "$@"`,
		filepath.Join(x.repo, "hack", "_out", "bin", "memif-testpmd"),
		"--args", base+".dpdk.args", "--file-prefix", prefix, "--connect-timeout", "2m")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	x.podSucceeded(ctx, t, "default", "memif-dpdk-host", 3*time.Minute)
	sum := x.verified(ctx, t, "default", "memif-dpdk-host")
	err := cmd.Wait() // memif-testpmd stops testpmd once the pod has left
	last := lastLine(log.String())
	if err != nil || sum["rx_pkts"] == 0 || !strings.Contains(last, "peer_left=true") ||
		!strings.Contains(log.String(), " "+strings.TrimSpace(hostArgs)+" ") {
		t.Fatalf("node testpmd from %s.dpdk.args: %v; log tail:\n%s", base, err, tail(log.String(), 30))
	}
	x.logf("dpdk: node's testpmd from %s.dpdk.args: %s", filepath.Base(base), last)
}

// hostSideBase is state/host-ports/<slot> (without an extension) of the pod's host port, once
// memif-cni has written it.
func hostSideBase(ctx context.Context, t *testing.T, pod string) string {
	t.Helper()
	hostPort(ctx, t, pod) // waits for it
	files, _ := filepath.Glob(filepath.Join(t3StateDir, "state", "host-ports", "*.json"))
	for _, f := range files {
		var hp map[string]any
		if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &hp) == nil && hp["pod"] == pod && hp["namespace"] == "default" {
			return strings.TrimSuffix(f, ".json")
		}
	}
	t.Fatalf("no host-ports/<slot>.json for %s", pod)
	return ""
}

// waitFile returns the content of path once it is there (memif-cni writes a port's files
// during one ADD, in an order this test need not know).
func waitFile(ctx context.Context, t *testing.T, path string) string {
	t.Helper()
	var b []byte
	if err := node.Poll(ctx, time.Minute, path, func() (bool, error) {
		var err error
		b, err = os.ReadFile(path)
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
