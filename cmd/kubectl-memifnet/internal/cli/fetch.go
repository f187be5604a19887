package cli

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

func (e *env) pods(ctx context.Context, ns string, opts metav1.ListOptions) ([]corev1.Pod, error) {
	l, err := e.cs.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing pods%s: %w", where(ns), err)
	}
	return l.Items, nil
}

func where(ns string) string {
	if ns == "" {
		return " in all namespaces"
	}
	return " in namespace " + ns
}

// claims lists ResourceClaims; a cluster without resource.k8s.io/v1 has none, and a user who
// may not list them gets an error to note (the device plugin's links are still shown).
func (e *env) claims(ctx context.Context, ns string) ([]resourceapi.ResourceClaim, error) {
	l, err := e.cs.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // resource.k8s.io/v1 not served: no DRA
	}
	if err != nil {
		return nil, fmt.Errorf("listing resourceclaims%s: %w", where(ns), err)
	}
	return l.Items, nil
}

// podEvents is the Events about a pod (core/v1, which also shows events.k8s.io Events).
func (e *env) podEvents(ctx context.Context, pod *corev1.Pod) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": pod.Name, "involvedObject.namespace": pod.Namespace}
	l, err := e.cs.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("listing events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var out []corev1.Event
	for _, ev := range l.Items {
		if ev.InvolvedObject.UID == "" || ev.InvolvedObject.UID == pod.UID {
			out = append(out, ev)
		}
	}
	return out, nil
}

// getPod reads a pod, saying what a missing one may mean.
func (e *env) getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	p, err := e.cs.CoreV1().Pods(e.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("pod %s not found in namespace %s. A pod the memifnet admission webhook refused was never "+
			"created, so it cannot be explained after the fact: the refusal, naming the field, was the error of kubectl "+
			"apply/create (see it again with kubectl apply --dry-run=server -f ...)", name, e.namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", e.namespace, name, err)
	}
	return p, nil
}

// scrape reads the agents' metrics of the nodes: one snapshot each, or, when rates are wanted
// and the first had ports, a second one rateInterval later, taken again every rateInterval
// (up to maxRateWait) while a port's counters are those of the same status file: an agent's
// counters move only when a port's application rewrites it (portstatus.DefaultInterval).
// Errors are per node.
func (e *env) scrape(ctx context.Context, nodes []string, rates bool) (first, second map[string]*agentmetrics.Snapshot, errs map[string]error) {
	first, second, errs = map[string]*agentmetrics.Snapshot{}, map[string]*agentmetrics.Snapshot{}, map[string]error{}
	sort.Strings(nodes)
	for _, n := range nodes {
		s, err := e.metrics.Scrape(ctx, n)
		if err != nil {
			errs[n] = err
			continue
		}
		first[n] = &s
	}
	if !rates || e.rateInterval <= 0 || len(first) == 0 {
		return first, second, errs
	}
	deadline := time.Now().Add(max(maxRateWait, e.rateInterval))
	for {
		select {
		case <-ctx.Done():
			return first, second, errs
		case <-time.After(e.rateInterval):
		}
		waiting := false
		for n, a := range first {
			if b := second[n]; b != nil && !sameFiles(*a, *b) {
				continue
			}
			if s, err := e.metrics.Scrape(ctx, n); err == nil {
				second[n] = &s
				waiting = waiting || sameFiles(*a, s)
			}
		}
		if !waiting || time.Now().Add(e.rateInterval).After(deadline) {
			return first, second, errs
		}
	}
}

// maxRateWait bounds the wait for every port's next status file.
const maxRateWait = portstatus.DefaultInterval + 2*time.Second

// sameFiles reports whether a port of b whose link is up has the counters of a's reading of its
// status file (a port down may have no writer left to rewrite it: it is not waited for).
func sameFiles(a, b agentmetrics.Snapshot) bool {
	for k, cb := range b.Ports {
		if ca, ok := a.Ports[k]; ok && cb.Up && !cb.At.IsZero() && cb.At.Equal(ca.At) {
			return true
		}
	}
	return false
}
