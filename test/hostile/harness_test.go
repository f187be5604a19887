// Package hostile_test is the hostile-pod suite: each test plays an attack of docs/security.md as
// a pod would, against the real memif-deviceplugin and memif-cni binaries (the device plugin as a
// process serving a kubelet stand-in built from the real API types, memif-cni through libcni), and
// checks that host files, host mounts and the next tenant's files are untouched and that every
// refusal says what was refused.
//
// A pod is cmd podsim in a mount namespace of its own, chrooted into a tmpfs that holds only its
// socket slots and pool units, mounted where a container sees them (/run/memifnet/...). It runs
// as root with the capabilities a container runtime grants by default (no CAP_SYS_ADMIN: it cannot
// mount) or as a non-root user, keeps file descriptors across commands, and can pass them to
// another pod over a unix socket.
package hostile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/memifnet/memifnet/internal/kubeletfake"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
)

const poolRes = names.ResourcePrefix + names.DefaultPool

func TestMain(m *testing.M) { testutil.Main(m) }

// bins builds the node agents and the pod simulator once, static, as the image does.
func bins(t *testing.T) string {
	t.Helper()
	return testutil.Built(t, testutil.Build{Pkgs: []string{
		"../../cmd/memif-deviceplugin", "../../cmd/memif-cni", "../../cmd/memif-cni-podinfo", "./podsim"}})
}

// node is one node: a kubelet stand-in, memif-deviceplugin running against it with 4 slots and 2
// pool units, and memif-cni called through libcni.
type node struct {
	t                                      *testing.T
	root, kubeletDir, stateDir, devinfoDir string
	cdiDir                                 string
	kubelet                                *kubeletfake.Kubelet
	slots, pool                            pluginapi.DevicePluginClient
	cni                                    *libcni.CNIConfig
	plugin                                 *exec.Cmd
}

type nodeOptions struct {
	cdi bool
}

func newNode(t *testing.T, o nodeOptions) *node {
	t.Helper()
	testutil.RequireRoot(t, "the node agents mount, and pods need mount namespaces")
	testutil.NeedHugepages(t, 16)
	for _, tool := range []string{"unshare", "pivot_root", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.SkipOrFail(t, "%s (util-linux, coreutils) missing: %v", tool, err)
		}
	}
	bin := bins(t)
	root, err := os.MkdirTemp("", "hostile") // short: socket paths must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, root: root, kubeletDir: filepath.Join(root, "kubelet"), stateDir: filepath.Join(root, "state"),
		devinfoDir: filepath.Join(root, "devinfo"), kubelet: kubeletfake.New()}
	t.Cleanup(func() {
		testutil.UnmountUnder(t, root)
		os.RemoveAll(root)
	})
	n.kubelet.ServeRegistration(t, n.kubeletDir)
	n.kubelet.ServePodResources(t, n.kubeletDir)
	cfg := filepath.Join(root, "config.yaml")
	must(t, os.WriteFile(cfg, []byte("socketSlots: 4\nslotLimits: {size: 256Ki, inodes: 32}\n"+
		"pools:\n  - {name: hugepool, pageSize: 2Mi, unitSize: 4Mi, unitsPerNUMANode: 2}\n"), 0o644))
	args := []string{"--config", cfg, "--kubelet-dir", n.kubeletDir, "--state-dir", n.stateDir,
		"--devinfo-dir", filepath.Join(n.devinfoDir, "dp"), "--http-address", "", "--local-metrics-address", "", "--log-format", "text"}
	if o.cdi {
		n.cdiDir = filepath.Join(root, "cdi")
		args = append(args, "--cdi-dir", n.cdiDir)
	}
	n.plugin = exec.Command(filepath.Join(bin, "memif-deviceplugin"), args...)
	logf, err := os.Create(filepath.Join(root, "deviceplugin.log"))
	must(t, err)
	n.plugin.Stdout, n.plugin.Stderr = logf, logf
	must(t, n.plugin.Start())
	t.Cleanup(func() {
		_ = n.plugin.Process.Kill()
		_ = n.plugin.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("memif-deviceplugin log:\n%s", b)
		}
	})
	regs := map[string]string{}
	for len(regs) < 2 {
		r := n.kubelet.WaitRegistration(t, 10*time.Second)
		regs[r.ResourceName] = r.Endpoint
	}
	n.slots = n.kubelet.Dial(t, regs[names.SocketResource])
	n.pool = n.kubelet.Dial(t, regs[poolRes])
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{bin}, filepath.Join(root, "cni-cache"), &invoke.DefaultExec{
		RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{},
	})
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// allocate plays the kubelet admitting a pod: Allocate on both resources, then PodResources says
// the pod holds the devices. It returns the host paths the runtime would mount.
func (n *node) allocate(p *pod) {
	n.t.Helper()
	devs := map[string][]string{names.SocketResource: p.Slots}
	if p.Unit != "" {
		devs[poolRes] = []string{p.Unit}
	}
	for res, ids := range devs {
		c := n.slots
		if res == poolRes {
			c = n.pool
		}
		resp, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{
			ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		if err != nil {
			n.t.Fatalf("Allocate %v for pod %s: %v", ids, p.Name, err)
		}
		for _, m := range resp.ContainerResponses[0].Mounts {
			p.mounts = append(p.mounts, [2]string{m.HostPath, m.ContainerPath})
		}
		for _, d := range resp.ContainerResponses[0].CdiDevices {
			p.cdiDevices = append(p.cdiDevices, d.Name)
		}
	}
	n.kubelet.SetPod(kubeletfake.Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
		Annotations: map[string]string{names.PortsAnnotation: p.Annotation}, Devices: devs})
}

// forget plays the kubelet after a pod is gone: PodResources no longer lists it.
func (n *node) forget(p *pod) { n.kubelet.DeletePod(p.Namespace, p.Name) }

// pod is a Kubernetes pod: identity, annotation, devices, its current sandbox and its processes.
type pod struct {
	Namespace, Name, UID string
	Annotation           string
	Slots                []string
	Unit                 string
	sandbox              int // the sandbox counter: a new one makes a new container ID
	netns                ns.NetNS
	mounts               [][2]string // host path, container path (from Allocate)
	cdiDevices           []string
}

func (n *node) newPod(name, annotation, unit string, slots ...string) *pod {
	n.t.Helper()
	netns, err := testutils.NewNS()
	must(n.t, err)
	n.t.Cleanup(func() { netns.Close(); _ = testutils.UnmountNS(netns) })
	return &pod{Namespace: "tenants", Name: name, UID: "uid-" + name, Annotation: annotation, Slots: slots, Unit: unit, netns: netns}
}

func (p *pod) containerID() string { return fmt.Sprintf("%s-sandbox-%d", p.Name, p.sandbox) }

func (n *node) confList(network string) *libcni.NetworkConfigList {
	n.t.Helper()
	b, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": network, "plugins": []any{map[string]any{
		"type": "memif-cni", "stateDir": n.stateDir, "kubeletDir": n.kubeletDir, "deviceInfoDir": n.devinfoDir,
		"kubeletURL": "none", "capabilities": map[string]bool{"io.kubernetes.cri.pod-annotations": true},
	}}})
	must(n.t, err)
	l, err := libcni.ConfListFromBytes(b)
	must(n.t, err)
	return l
}

func (n *node) rt(p *pod, containerID string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: containerID, IfName: "net1", NetNS: p.netns.Path(),
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", p.Namespace}, {"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID}, {"K8S_POD_UID", p.UID}},
		CapabilityArgs: map[string]any{"io.kubernetes.cri.pod-annotations": map[string]string{names.PortsAnnotation: p.Annotation}},
	}
}

// add runs the CNI ADD of the pod's current sandbox on network "memifnet".
func (n *node) add(p *pod) error { return n.addOn("memifnet", p) }

func (n *node) addOn(network string, p *pod) error {
	_, err := n.cni.AddNetworkList(context.Background(), n.confList(network), n.rt(p, p.containerID()))
	return err
}

func (n *node) mustAdd(p *pod) {
	n.t.Helper()
	if err := n.add(p); err != nil {
		n.t.Fatalf("ADD %s: %v", p.Name, err)
	}
}

// del runs the CNI DEL of sandbox number sandbox of p.
func (n *node) del(p *pod, sandbox int) error {
	id := fmt.Sprintf("%s-sandbox-%d", p.Name, sandbox)
	return n.cni.DelNetworkList(context.Background(), n.confList("memifnet"), n.rt(p, id))
}

func (n *node) mustDel(p *pod, sandbox int) {
	n.t.Helper()
	if err := n.del(p, sandbox); err != nil {
		n.t.Fatalf("DEL %s sandbox %d: %v", p.Name, sandbox, err)
	}
}

// recreateSandbox plays the pause process dying (a pod with shareProcessNamespace kills it) or a
// node reboot: DEL of the old sandbox, ADD of a new one, no new Allocate.
func (n *node) recreateSandbox(p *pod) error {
	n.mustDel(p, p.sandbox)
	p.sandbox++
	return n.add(p)
}

func (n *node) slotHost(slot string) string {
	return filepath.Join(n.stateDir, names.SocketsSubdir, slot)
}

func (n *node) unitHost(unit string) string {
	return filepath.Join(n.stateDir, names.PoolsSubdir, names.DefaultPool, unit)
}

// proc is a running pod process (cmd podsim).
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
}

// runAs says who the pod's process is: root with a container's default capabilities, or a user.
type runAs struct {
	uid int // 0: root without CAP_SYS_ADMIN
}

// start runs a process of p: a new mount namespace with a private tmpfs root that holds the pod's
// devices where a container sees them (mounted the way the runtime does, recursive binds unless
// bindMode says otherwise), pivoted into, with the capabilities of as.
func (n *node) start(p *pod, as runAs, bindMode string) *proc {
	n.t.Helper()
	if bindMode == "" {
		bindMode = "--rbind"
	}
	podRoot := filepath.Join(n.root, "pods", fmt.Sprintf("%s-%d", p.Name, time.Now().UnixNano()))
	must(n.t, os.MkdirAll(podRoot, 0o755))
	script := []string{"set -e", "mount -t tmpfs -o size=16m pod " + podRoot, "touch " + podRoot + "/podsim",
		"mount --bind " + filepath.Join(bins(n.t), "podsim") + " " + podRoot + "/podsim"}
	for _, m := range p.mounts {
		target := podRoot + m[1]
		fi, err := os.Stat(m[0])
		must(n.t, err)
		if fi.IsDir() {
			script = append(script, "mkdir -p "+target)
		} else {
			script = append(script, "mkdir -p "+filepath.Dir(target), "touch "+target)
		}
		script = append(script, "mount "+bindMode+" "+m[0]+" "+target)
	}
	// As runc does: pivot into the pod's root and detach the host's mounts (podsim -container),
	// so that the pod's view has only its own mounts, then drop the capabilities.
	script = append(script, "mkdir "+podRoot+"/.old", "cd "+podRoot, "pivot_root . .old",
		fmt.Sprintf("exec /podsim -container %d", as.uid))
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", strings.Join(script, "\n"))
	in, err := cmd.StdinPipe()
	must(n.t, err)
	out, err := cmd.StdoutPipe()
	must(n.t, err)
	cmd.Stderr = os.Stderr
	must(n.t, cmd.Start())
	pr := &proc{t: n.t, name: p.Name, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	n.t.Cleanup(pr.exit)
	return pr
}

// do sends a command and returns its result, or the pod's error. It may run on any goroutine
// (one command at a time per process).
func (pr *proc) do(cmd string, args ...string) (string, error) {
	for i, a := range args {
		args[i] = url.PathEscape(a)
	}
	if _, err := fmt.Fprintln(pr.in, strings.Join(append([]string{cmd}, args...), " ")); err != nil {
		return "", fmt.Errorf("pod %s: %w", pr.name, err)
	}
	if !pr.out.Scan() {
		return "", fmt.Errorf("pod %s died (%v) on %s", pr.name, pr.out.Err(), cmd)
	}
	status, res, _ := strings.Cut(pr.out.Text(), " ")
	res, _ = url.PathUnescape(res)
	if status != "ok" {
		return "", fmt.Errorf("%s", res)
	}
	return res, nil
}

// must runs a command that has to work.
func (pr *proc) must(cmd string, args ...string) string {
	pr.t.Helper()
	res, err := pr.do(cmd, args...)
	if err != nil {
		pr.t.Fatalf("pod %s: %s %v: %v", pr.name, cmd, args, err)
	}
	return res
}

func (pr *proc) exit() {
	if pr.cmd.ProcessState != nil {
		return
	}
	fmt.Fprintln(pr.in, "exit")
	pr.in.Close()
	done := make(chan struct{})
	go func() { _ = pr.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = pr.cmd.Process.Kill()
		<-done
	}
}

// cniError is the plugin's coded error.
func cniError(t *testing.T, err error) *types.Error {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a CNI error", err, err)
	}
	return e
}
