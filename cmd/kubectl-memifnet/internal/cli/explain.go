package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/explain"
)

// gather reads what explain and ports need about a pod, in the pod's namespace only: the pod,
// its namespace's pods and claims, its Events (Forbidden is noted, not fatal) and its node
// agent's metrics.
func (e *env) gather(ctx context.Context, name string) (explain.Input, error) {
	pod, err := e.getPod(ctx, name)
	if err != nil {
		return explain.Input{}, err
	}
	in := explain.Input{Pod: pod}
	if in.Pods, err = e.pods(ctx, pod.Namespace, metav1.ListOptions{}); err != nil {
		in.Pods = []corev1.Pod{*pod} // peers unknown; the pod itself is still explained
		e.note("%v", err)
	}
	in.Claims, in.ClaimsErr = e.claims(ctx, pod.Namespace)
	in.Events, in.EventsErr = e.podEvents(ctx, pod)
	if pod.Spec.NodeName != "" {
		var s agentmetrics.Snapshot
		if s, in.MetricsErr = e.metrics.Scrape(ctx, pod.Spec.NodeName); in.MetricsErr == nil {
			in.Metrics = &s
		}
	}
	return in, nil
}

func runExplain(ctx context.Context, e *env, args []string) error {
	in, err := e.gather(ctx, args[0])
	if err != nil {
		return err
	}
	fs := explain.Explain(in)
	if e.printer != nil {
		return e.print(struct {
			Namespace string            `json:"namespace"`
			Pod       string            `json:"pod"`
			Findings  []explain.Finding `json:"findings"`
		}{in.Pod.Namespace, in.Pod.Name, fs})
	}
	fmt.Fprintln(e.out, clean(fmt.Sprintf("Pod %s/%s:", in.Pod.Namespace, in.Pod.Name)))
	for _, f := range fs {
		fmt.Fprintln(e.out, "  "+clean(f.Reason+": "+f.Message))
	}
	return nil
}
