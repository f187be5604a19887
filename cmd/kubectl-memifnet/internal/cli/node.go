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

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/nodeview"
	"github.com/memifnet/memifnet/internal/names"
)

// runNode needs cluster-wide reads: get nodes, list pods (field selector spec.nodeName), list
// resourceslices and resourceclaims. What is forbidden besides the node is noted.
func runNode(ctx context.Context, e *env, args []string) error {
	node, err := e.cs.CoreV1().Nodes().Get(ctx, args[0], metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s (needs get on nodes): %w", args[0], err)
	}
	pods, err := e.pods(ctx, "", metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
	if err != nil {
		e.note("used slots unknown: %v", err)
	}
	slices, err := e.slices(ctx)
	if err != nil {
		e.note("DRA devices not shown: %v", err)
	}
	var claims []resourceapi.ResourceClaim
	if len(slices) > 0 {
		if claims, err = e.claims(ctx, ""); err != nil {
			e.note("DRA devices' use unknown: %v", err)
		}
	}
	rep := nodeview.Build(node, pods, slices, claims)
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
