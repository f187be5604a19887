package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/linkview"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/nodeview"
	"github.com/memifnet/memifnet/internal/names"
)

// runNode needs cluster-wide reads: get nodes, list pods (the node's, its agent and its links'
// peers), list resourceslices and resourceclaims; the links' state and rates need what links
// does (docs/kubectl.md, RBAC). What is forbidden besides the node is noted.
func runNode(ctx context.Context, e *env, args []string) error {
	node, err := e.cs.CoreV1().Nodes().Get(ctx, args[0], metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s (needs get on nodes): %w", args[0], err)
	}
	pods, podsErr := e.pods(ctx, "", metav1.ListOptions{})
	if podsErr != nil {
		e.note("used slots, the node's agent and its links unknown: %v", podsErr)
	}
	slices, err := e.slices(ctx)
	if err != nil {
		e.note("DRA devices not shown: %v", err)
	}
	claims, err := e.claims(ctx, "")
	if err != nil {
		e.note("DRA devices' use and DRA links unknown: %v", err)
	}
	rep := nodeview.Build(node, pods, slices, claims)
	if podsErr == nil {
		rep.AddAgent(node, pods, e.agentNS, agentSelector)
		rep.AddLinks(linkview.Links(pods, claims))
		e.addMetrics(ctx, rep.Links)
	}
	if evs, err := e.nodeEvents(ctx, node.Name); err != nil {
		e.note("the node agent's Events (withheld pool units) not read: %v", err)
	} else {
		rep.AddAgentEvents(evs)
	}
	if e.printer != nil {
		return e.print(rep)
	}
	return printNode(e, rep)
}

// nodeEvents is the Events about the Node, which the kubelet and the node agent record in
// namespace default.
func (e *env) nodeEvents(ctx context.Context, node string) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node}
	l, err := e.cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("listing events of node %s: %w", node, err)
	}
	return l.Items, nil
}

func (e *env) slices(ctx context.Context) ([]resourceapi.ResourceSlice, error) {
	l, err := e.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + names.DRADriver})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing resourceslices: %w", err)
	}
	return l.Items, nil
}

func printNode(e *env, rep nodeview.Report) error {
	fmt.Fprintln(e.out, "Node "+clean(rep.Node))
	switch a := rep.Agent; {
	case a != nil:
		fmt.Fprintf(e.out, "Agent %s/%s (%s, %s, %s)\n", clean(a.Namespace), clean(a.Pod), clean(a.Phase), map[bool]string{true: "ready", false: "not ready"}[a.Ready], clean(a.Image))
	case rep.AgentNote != "":
		fmt.Fprintln(e.out, "Agent: none: "+clean(rep.AgentNote))
	}
	t := newTable(e.out)
	t.row("RESOURCE", "CAPACITY", "ALLOCATABLE", "USED", "FREE", "UNHEALTHY")
	for _, r := range rep.Resources {
		t.row(r.Name, i64(r.Capacity), i64(r.Allocatable), i64(r.Used), i64(r.Free), i64(r.Unhealthy))
	}
	if len(rep.Resources) == 0 {
		t.row("(no memifnet.io/* resources: the device plugin does not run here)")
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(rep.DRA) > 0 {
		fmt.Fprintln(e.out, "\nDRA devices (driver "+names.DRADriver+"):")
		t := newTable(e.out)
		t.row("TYPE", "POOL", "TOTAL", "USED", "FREE", "TAINTED")
		for _, g := range rep.DRA {
			t.row(g.Type, dash(g.Pool), i64(g.Total), i64(g.Used), i64(g.Free), i64(g.Tainted))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(rep.Pods) > 0 {
		fmt.Fprintln(e.out, "\nPods:")
		t := newTable(e.out)
		t.row("NAMESPACE", "POD", "PHASE", "RESOURCES")
		for _, p := range rep.Pods {
			t.row(p.Namespace, p.Pod, p.Phase, resources(p.Resources))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if err := printNodeLinks(e, rep); err != nil {
		return err
	}
	if len(rep.Events) > 0 {
		fmt.Fprintln(e.out, "\nAgent events:")
		t := newTable(e.out)
		t.row("  TYPE", "REASON", "MESSAGE")
		for _, ev := range rep.Events[:min(len(rep.Events), 10)] {
			t.row("  "+ev.Type, ev.Reason, ev.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(e.out, "\nUnhealthy:")
	if len(rep.Unhealthy) == 0 {
		fmt.Fprintln(e.out, "  none")
	}
	for _, u := range rep.Unhealthy {
		fmt.Fprintln(e.out, "  "+clean(u))
	}
	return nil
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func resources(m map[string]int64) string {
	var parts []string
	for _, r := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.TrimPrefix(r, names.ResourcePrefix), m[r]))
	}
	return strings.Join(parts, ",")
}

func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// printNodeLinks is the node's links, as links -A shows them without the node.
func printNodeLinks(e *env, rep nodeview.Report) error {
	if len(rep.Links) == 0 {
		fmt.Fprintln(e.out, "\nLinks: none")
		return nil
	}
	fmt.Fprintln(e.out, "\nLinks:")
	t := newTable(e.out)
	t.row("NAMESPACE", "LINK", "BACKEND", "END-A", "END-B", "STATUS", "STATE", "PPS-AB", "PPS-BA", "DROPS")
	for _, l := range rep.Links {
		a, b := l.Ends[0], linkview.End{}
		if len(l.Ends) > 1 {
			b = l.Ends[1]
		}
		name := l.Name
		if l.Host {
			name = "<host-port>"
		}
		t.row(l.Namespace, name, l.Backend, endName(a, false), endName(b, l.Host), l.Status, dash(l.State), pps(a, b), pps(b, a), drops(a, b))
	}
	return t.flush()
}
