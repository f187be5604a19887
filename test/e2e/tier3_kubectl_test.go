//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// The kubectl step's namespace and its namespace user (docs/kubectl.md, RBAC).
const (
	kcNamespace = "memifnet-kubectl"
	kcViewer    = "memifnet-viewer"
)

// kcLink is the JSON of one link as `kubectl memifnet links -o json` prints it.
type kcLink struct {
	Namespace, Link, Backend, Node, Status, State, StateUnknownReason string
	Ends                                                              []kcEnd
}

type kcEnd struct {
	Pod, Port, Role string
	Wired           bool
	Stats           *struct {
		Up        bool
		RxPackets float64
	}
}

type kcFinding struct {
	Reason, Message string
	CNI             *struct {
		Code uint
		Msg  string
	}
}

// memifnetPlugin runs the built kubectl-memifnet with a kubeconfig; stdout and stderr apart.
func (x *tier3) memifnetPlugin(ctx context.Context, t *testing.T, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(x.repo, "hack", "_out", "bin", "kubectl-memifnet"),
		append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func (x *tier3) memifnetJSON(ctx context.Context, t *testing.T, kubeconfig string, v any, args ...string) string {
	t.Helper()
	out, errs, err := x.memifnetPlugin(ctx, t, kubeconfig, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("kubectl memifnet %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kubectl memifnet %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return errs
}

func findLink(links []kcLink, ns, name string) *kcLink {
	for i := range links {
		if links[i].Namespace == ns && links[i].Link == name {
			return &links[i]
		}
	}
	return nil
}

// endsOf is a link's ends; none for no link.
func endsOf(l *kcLink) []kcEnd {
	if l == nil {
		return nil
	}
	return l.Ends
}

func findReason(fs []kcFinding, reason string) *kcFinding {
	for i := range fs {
		if fs[i].Reason == reason {
			return &fs[i]
		}
	}
	return nil
}

// kubectlPlugin: `kubectl memifnet` (the built binary) on the cluster. A running link pair
// shows in `links -A` with both pods, ports and the node; a pod asking for more slots than the
// node has is explained as NoSlot with the scheduler's message; a third pod on the link is
// explained with memif-cni's refusal, code 102, from its FailedCreatePodSandBox Event; `node`
// shows the slots used and free as the API's allocatable and the pods' requests give them; and a
// namespace user (a ServiceAccount with a namespaced Role, token from kubectl create token)
// runs links and explain in its namespace and is refused -A.
func (x *tier3) kubectlPlugin(ctx context.Context, t *testing.T) {
	x.kubectl(ctx, t, "create", "namespace", kcNamespace)
	defer x.kubectl(ctx, t, "delete", "namespace", kcNamespace, "--wait=true")
	admin := x.c.Kubeconfig()
	x.kubectlIn(ctx, t, perfPod("kc-rx", "east", "kc-link", "--mode=rx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m")+
		"---\n"+perfPod("kc-tx", "west", "kc-link", "--mode=tx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m"),
		"-n", kcNamespace, "apply", "-f", "-")
	if err := node.Poll(ctx, 2*time.Minute, "kc-rx receiving", func() (bool, error) {
		return node.LastProgressRx(x.logs(ctx, kcNamespace, "kc-rx")) > 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	x.logf("kubectl: kc-rx and kc-tx pass traffic on kc-link in %s", kcNamespace)

	// The agent's per-port metrics, read through a port-forward to the agent's loopback
	// endpoint (the node-address one wants a token, issue 32 item 6): the link is up and kc-rx
	// has received. The app writes its counters and the agent reads them once a second, so the
	// first reading after kc-rx's first progress line may still say 0: ask until it does not.
	var links struct{ Links []kcLink }
	var l *kcLink
	var notes string
	var rx float64
	if err := node.Poll(ctx, 30*time.Second, "kc-rx's received packets in links -A", func() (bool, error) {
		links.Links = nil
		notes = x.memifnetJSON(ctx, t, admin, &links, "links", "-A")
		l, rx = findLink(links.Links, kcNamespace, "kc-link"), 0
		for _, e := range endsOf(l) {
			if e.Pod == "kc-rx" && e.Stats != nil {
				rx = e.Stats.RxPackets
			}
		}
		return rx > 0, nil
	}); err != nil {
		t.Errorf("%v (last: %+v, stderr %q)", err, l, notes)
	}
	if l == nil || len(l.Ends) != 2 || l.Node != cluster.NodeName || l.Status != "Wired" || l.Backend != "device-plugin" {
		t.Fatalf("links -A: kc-link %+v; want both pods wired on node %s\n%+v", l, cluster.NodeName, links.Links)
	}
	got := map[string]string{}
	for _, e := range l.Ends {
		got[e.Pod] = e.Port
		if !e.Wired {
			t.Errorf("links -A: end %+v not wired", e)
		}
	}
	if got["kc-rx"] != "east" || got["kc-tx"] != "west" {
		t.Errorf("links -A: kc-link's ends %v, want kc-rx/east and kc-tx/west", got)
	}
	if l.State != "up" || l.StateUnknownReason != "" || rx == 0 {
		t.Errorf("links -A: state %q (reason %q), kc-rx received %v, stderr %q: want up, from the agent's metrics", l.State, l.StateUnknownReason, rx, notes)
	}
	table, _, err := x.memifnetPlugin(ctx, t, admin, "links", "-A")
	if err != nil || !tableRow(table, kcNamespace, "kc-link", "device-plugin", "kc-rx/east", "kc-tx/west", cluster.NodeName, "Wired", "up") {
		t.Fatalf("links -A (table): %v\n%s", err, table)
	}
	x.logf("kubectl: links -A:\n%s", table)
	x.scrapeAgentHTTPS(ctx, t)

	// No slot: the scheduler's Insufficient memifnet.io/socket.
	x.kubectlIn(ctx, t, strings.Replace(perfPod("kc-too-many", "east", "kc-none", "--mode=rx"),
		"memifnet.io/socket: 1", "memifnet.io/socket: 65", 1), "-n", kcNamespace, "apply", "-f", "-")
	x.waitPod(ctx, t, "kc-too-many", "unschedulable for lack of slots", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && strings.Contains(c.Message, "Insufficient "+names.SocketResource) {
				return true
			}
		}
		return false
	})
	var ex struct{ Findings []kcFinding }
	x.memifnetJSON(ctx, t, admin, &ex, "-n", kcNamespace, "explain", "kc-too-many")
	if f := findReason(ex.Findings, "NoSlot"); f == nil || !strings.Contains(f.Message, "Insufficient "+names.SocketResource) {
		t.Fatalf("explain kc-too-many: %+v; want NoSlot with the scheduler's message", ex.Findings)
	}
	text, _, _ := x.memifnetPlugin(ctx, t, admin, "-n", kcNamespace, "explain", "kc-too-many")
	x.logf("kubectl: explain kc-too-many:\n%s", text)

	// A third pod on the link: memif-cni refuses its sandbox with code 102.
	x.kubectlIn(ctx, t, perfPod("kc-third", "north", "kc-link", "--mode=rx"), "-n", kcNamespace, "apply", "-f", "-")
	x.waitEvent(ctx, t, "kc-third", "FailedCreatePodSandBox", "memif-cni: link conflict")
	x.memifnetJSON(ctx, t, admin, &ex, "-n", kcNamespace, "explain", "kc-third")
	if f := findReason(ex.Findings, "CNIRefused"); f == nil || f.CNI == nil || f.CNI.Code != 102 || f.CNI.Msg != "link conflict" {
		t.Fatalf("explain kc-third: %+v; want CNIRefused with code 102 (link conflict)", ex.Findings)
	}
	if findReason(ex.Findings, "LinkConflict") == nil {
		t.Errorf("explain kc-third: %+v; want LinkConflict (two other pods name kc-link)", ex.Findings)
	}
	text, _, _ = x.memifnetPlugin(ctx, t, admin, "-n", kcNamespace, "explain", "kc-third")
	x.logf("kubectl: explain kc-third:\n%s", text)
	text, _, err = x.memifnetPlugin(ctx, t, admin, "-n", kcNamespace, "ports", "kc-third")
	if err != nil || !tableRow(text, "north", "device-plugin", "kc-link", "Conflict") || !strings.Contains(text, "FailedCreatePodSandBox") {
		t.Fatalf("ports kc-third: %v; want port north on kc-link (Conflict) and the sandbox Event\n%s", err, text)
	}
	x.logf("kubectl: ports kc-third:\n%s", text)

	x.kubectlNode(ctx, t, admin)
	x.namespaceUser(ctx, t)
	x.kubectl(ctx, t, "-n", kcNamespace, "delete", "pod", "--all", "--wait=true")
	x.noLeftovers(ctx, t, "after the kubectl step's pods")
}

// tableRow reports whether a row of the table holds the cells, in order.
func tableRow(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		i := 0
		for _, c := range f {
			if i < len(cells) && c == cells[i] {
				i++
			}
		}
		if i == len(cells) {
			return true
		}
	}
	return false
}

func (x *tier3) waitPod(ctx context.Context, t *testing.T, name, what string, cond func(*corev1.Pod) bool) {
	t.Helper()
	var last *corev1.Pod
	if err := node.Poll(ctx, 2*time.Minute, name+" "+what, func() (bool, error) {
		p, err := x.cs.CoreV1().Pods(kcNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return cond(p), nil
	}); err != nil {
		t.Fatalf("%v: status %+v", err, last.Status)
	}
}

// waitEvent waits for an Event about the pod (in kcNamespace) with the reason and a message
// holding text.
func (x *tier3) waitEvent(ctx context.Context, t *testing.T, pod, reason, text string) {
	t.Helper()
	x.waitEventIn(ctx, t, kcNamespace, pod, reason, text)
}

// waitEventIn is waitEvent in namespace ns.
func (x *tier3) waitEventIn(ctx context.Context, t *testing.T, ns, pod, reason, text string) {
	t.Helper()
	var seen []string
	if err := node.Poll(ctx, 2*time.Minute, pod+" Event "+reason, func() (bool, error) {
		evs, err := x.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range evs.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("%v; events:\n%s", err, strings.Join(seen, "\n"))
	}
}

// kubectlNode: `node` shows the node's slots as allocatable minus the requests of its pods that
// have not ended, counted here from the API independently.
func (x *tier3) kubectlNode(ctx context.Context, t *testing.T, admin string) {
	n, err := x.cs.CoreV1().Nodes().Get(ctx, cluster.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := x.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + cluster.NodeName})
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			q := c.Resources.Limits[names.SocketResource]
			used += q.Value()
		}
	}
	alloc := n.Status.Allocatable[corev1.ResourceName(names.SocketResource)]
	var rep struct {
		Resources []struct {
			Name                                         string
			Capacity, Allocatable, Used, Free, Unhealthy int64
		}
	}
	x.memifnetJSON(ctx, t, admin, &rep, "node", cluster.NodeName)
	found := false
	for _, r := range rep.Resources {
		if r.Name != names.SocketResource {
			continue
		}
		found = true
		if r.Allocatable != alloc.Value() || r.Used != used || r.Free != alloc.Value()-used || used < 3 || r.Unhealthy != 0 {
			t.Fatalf("node: %s %+v; the API says allocatable %d, used %d (kc-rx, kc-tx, kc-third at least)", names.SocketResource, r, alloc.Value(), used)
		}
	}
	if !found {
		t.Fatalf("node: no %s in %+v", names.SocketResource, rep)
	}
	text, _, err := x.memifnetPlugin(ctx, t, admin, "node", cluster.NodeName)
	if err != nil || !tableRow(text, names.SocketResource, fmt.Sprint(alloc.Value()), fmt.Sprint(alloc.Value()), fmt.Sprint(used), fmt.Sprint(alloc.Value()-used), "0") {
		t.Fatalf("node (table): %v\n%s", err, text)
	}
	x.logf("kubectl: node %s:\n%s", cluster.NodeName, text)
}

// namespaceUser: a ServiceAccount with only a namespaced Role (get/list pods, events and
// resourceclaims) runs links and explain in its namespace with a token from kubectl create
// token, and is refused links -A.
func (x *tier3) namespaceUser(ctx context.Context, t *testing.T) {
	x.kubectlIn(ctx, t, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[2]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: %[1]s, namespace: %[2]s}
rules:
  - apiGroups: [""]
    resources: [pods, events]
    verbs: [get, list]
  - apiGroups: [resource.k8s.io]
    resources: [resourceclaims]
    verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s, namespace: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[1]s}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
`, kcViewer, kcNamespace), "apply", "-f", "-")
	token := strings.TrimSpace(x.kubectl(ctx, t, "-n", kcNamespace, "create", "token", kcViewer, "--duration=10m"))
	cfg, err := clientcmd.LoadFromFile(x.c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	user := &clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": cfg.Clusters[cur.Cluster]},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{kcViewer: {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{kcViewer: {Cluster: "c", AuthInfo: kcViewer, Namespace: kcNamespace}},
		CurrentContext: kcViewer,
	}
	path := filepath.Join(t.TempDir(), "viewer.kubeconfig")
	if err := clientcmd.WriteToFile(*user, path); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)

	var links struct{ Links []kcLink }
	notes := x.memifnetJSON(ctx, t, path, &links, "links")
	if l := findLink(links.Links, kcNamespace, "kc-link"); l == nil || l.Status != "Conflict" || len(l.Ends) != 3 {
		t.Errorf("links as %s: kc-link %+v; want its three pods (Conflict)", kcViewer, l)
	}
	if !strings.Contains(notes, "forbidden") {
		t.Errorf("links as %s: stderr %q; want the agent's metrics noted as forbidden", kcViewer, notes)
	}
	var ex struct{ Findings []kcFinding }
	x.memifnetJSON(ctx, t, path, &ex, "explain", "kc-too-many")
	if findReason(ex.Findings, "NoSlot") == nil {
		t.Errorf("explain kc-too-many as %s: %+v; want NoSlot", kcViewer, ex.Findings)
	}
	x.memifnetJSON(ctx, t, path, &ex, "explain", "kc-third")
	if f := findReason(ex.Findings, "CNIRefused"); f == nil || f.CNI == nil || f.CNI.Code != 102 {
		t.Errorf("explain kc-third as %s: %+v; want CNIRefused code 102", kcViewer, ex.Findings)
	}
	out, errs, err := x.memifnetPlugin(ctx, t, path, "links", "-A")
	if err == nil || !strings.Contains(errs, "forbidden") {
		t.Errorf("links -A as %s: want forbidden, got %v\n%s%s", kcViewer, err, out, errs)
	}
	text, _, _ := x.memifnetPlugin(ctx, t, path, "links")
	x.logf("kubectl: as %s (namespaced Role only): links:\n%s  links -A: %s", kcViewer, text, strings.TrimSpace(errs))
}
