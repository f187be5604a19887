package explain

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/linkview"
	"github.com/memifnet/memifnet/internal/ports"
)

type portsPort = ports.Port

func samePod(a, b *corev1.Pod) bool {
	if a.UID != "" && b.UID != "" {
		return a.UID == b.UID
	}
	return a.Namespace == b.Namespace && a.Name == b.Name
}

// namesLink reports whether the pod names the link in its annotation or a link label.
func namesLink(pod *corev1.Pod, link string) bool {
	if _, ok := linkview.LinkLabels(pod)[link]; ok {
		return true
	}
	ps, _ := linkview.PodPorts(pod)
	for _, p := range ps {
		if p.Link == link {
			return true
		}
	}
	return false
}

func schedulerMessage(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	return "not scheduled yet"
}

// peers explains the pod's link from its peer pods.
func peers(pod *corev1.Pod, link string, pods []corev1.Pod) []Finding {
	var live, ended []*corev1.Pod
	for i := range pods {
		q := &pods[i]
		if q.Namespace != pod.Namespace || samePod(q, pod) || !namesLink(q, link) {
			continue
		}
		if linkview.Ended(q) {
			ended = append(ended, q)
		} else {
			live = append(live, q)
		}
	}
	f := func(reason, format string, a ...any) []Finding {
		return []Finding{{Reason: reason, Message: fmt.Sprintf("link %s: ", link) + fmt.Sprintf(format, a...)}}
	}
	switch {
	case len(live) == 0 && len(ended) > 0:
		return f(ReasonPeerEnded, "peer pod %s has ended (%s%s); a link needs both pods running", ended[0].Name, phaseOf(ended[0]), exitInfo(ended[0]))
	case len(live) == 0:
		return f(ReasonPeerMissing, "no other pod in namespace %s names this link: its other end is missing (both pods name the same link)", pod.Namespace)
	case len(live) > 1:
		var ns []string
		for _, q := range live {
			ns = append(ns, q.Name)
		}
		return f(ReasonLinkConflict, "%d other pods name this link (%s): a link joins two pods, memif-cni refuses a third (code 102)", len(live), strings.Join(ns, ", "))
	}
	q := live[0]
	switch {
	case !linkview.Scheduled(q):
		return f(ReasonPeerPending, "peer pod %s is Pending: %s", q.Name, schedulerMessage(q))
	case linkview.Scheduled(pod) && q.Spec.NodeName != pod.Spec.NodeName:
		return f(ReasonSplitNodes, "peer pod %s runs on node %s, this pod on %s: both ends of a link must share a node (the admission webhook's pod affinity keeps them together: is it installed?)",
			q.Name, q.Spec.NodeName, pod.Spec.NodeName)
	case !linkview.SandboxReady(q):
		return f(ReasonPeerPending, "peer pod %s is bound to node %s but its sandbox is not up yet (kubectl memifnet explain %s)", q.Name, q.Spec.NodeName, q.Name)
	}
	return nil
}

// podClaimPorts is the socket requests of memifnet claims the pod uses.
func podClaimPorts(in Input) map[string][]linkview.ClaimPort {
	out := map[string][]linkview.ClaimPort{}
	for i := range in.Claims {
		c := &in.Claims[i]
		cps, ok := linkview.ClaimPorts(c, in.Pods)
		if !ok {
			continue
		}
		for _, cp := range cps {
			if cp.Pod != nil && samePod(cp.Pod, in.Pod) {
				out[c.Name] = cps
			}
		}
	}
	return out
}

// claimFindings explains the pod's DRA claims.
func claimFindings(in Input, cps map[string][]linkview.ClaimPort) []Finding {
	var out []Finding
	if in.ClaimsErr == nil {
		have := map[string]bool{}
		for i := range in.Claims {
			have[in.Claims[i].Name] = true
		}
		refs := linkview.PodClaimRefs(in.Pod)
		for _, rc := range in.Pod.Spec.ResourceClaims {
			if name, ok := refs[rc.Name]; !ok || !have[name] {
				out = append(out, Finding{Reason: ReasonClaimMissing, Message: fmt.Sprintf("pod claim %s: its ResourceClaim %s does not exist (yet)", rc.Name, name)})
			}
		}
	}
	for claim, ports := range cps {
		for _, cp := range ports {
			switch {
			case cp.Pod == nil:
				out = append(out, Finding{Reason: ReasonPeerMissing, Message: fmt.Sprintf("claim %s: no pod uses request %s (the link's other end)", claim, cp.Request)})
			case !samePod(cp.Pod, in.Pod) && !linkview.Scheduled(cp.Pod):
				out = append(out, Finding{Reason: ReasonPeerPending, Message: fmt.Sprintf("claim %s: peer pod %s (request %s) is Pending: %s", claim, cp.Pod.Name, cp.Request, schedulerMessage(cp.Pod))})
			case cp.Allocated && !cp.Ready && linkview.Scheduled(in.Pod) && samePod(cp.Pod, in.Pod):
				out = append(out, Finding{Reason: ReasonWiring, Message: fmt.Sprintf("claim %s: device %s on node %s is allocated but not prepared yet (the DRA driver reports Ready once it is wired)", claim, cp.Device, cp.Node)})
			}
		}
	}
	for _, e := range newestFirst(in.Events) {
		if e.Reason == EventDRAPrepare {
			out = append(out, Finding{Reason: ReasonDRAPrepare, Message: e.Message})
			break
		}
	}
	return out
}

// wiring explains a bound pod's sandbox (memif-cni's refusals) and, when everything is wired,
// the link state from the agent's metrics.
func wiring(in Input, ps []ports.Port, cps map[string][]linkview.ClaimPort, blocked bool) []Finding {
	pod := in.Pod
	if !linkview.Scheduled(pod) {
		return nil
	}
	if !linkview.SandboxReady(pod) {
		for _, e := range newestFirst(in.Events) {
			if e.Reason != EventSandboxFailed {
				continue
			}
			if ce, ok := ParseCNIError(e.Message); ok {
				msg := fmt.Sprintf("memif-cni refused the pod's sandbox on node %s: code %d: %s", pod.Spec.NodeName, ce.Code, ce.Msg)
				if ce.Code == 0 {
					msg = fmt.Sprintf("memif-cni refused the pod's sandbox on node %s (code not known to this plugin): %s", pod.Spec.NodeName, ce.Msg)
				}
				if ce.Details != "" {
					msg += ": " + ce.Details
				}
				if ce.Hint != "" {
					msg += " -- " + ce.Hint
				}
				return []Finding{{Reason: ReasonCNIRefused, Message: msg, CNI: &ce}}
			}
			return []Finding{{Reason: ReasonCNIRefused, Message: "the runtime failed to create the pod's sandbox: " + e.Message}}
		}
		if blocked {
			return nil
		}
		return []Finding{{Reason: ReasonWiring, Message: fmt.Sprintf("bound to node %s; its sandbox is not up yet and no refusal was seen", pod.Spec.NodeName)}}
	}
	if blocked {
		return nil
	}
	var portNames []string
	for _, p := range ps {
		portNames = append(portNames, p.Name)
	}
	for _, c := range cps {
		for _, cp := range c {
			if cp.Pod != nil && samePod(cp.Pod, pod) {
				portNames = append(portNames, cp.Data.Port)
			}
		}
	}
	out := []Finding{{Reason: ReasonWired, Message: fmt.Sprintf("the pod runs on node %s with its port(s) %s wired", pod.Spec.NodeName, strings.Join(portNames, ", "))}}
	return append(out, state(in, portNames)...)
}

// state is each port's memif link state from the node agent's metrics.
func state(in Input, portNames []string) []Finding {
	if in.Metrics == nil {
		reason := "no reading"
		if in.MetricsErr != nil {
			reason = in.MetricsErr.Error()
		}
		return []Finding{{Reason: ReasonStateUnknown, Message: "link state unknown: the node agent's per-port metrics are not available: " + reason}}
	}
	var out []Finding
	for _, p := range portNames {
		c, ok := in.Metrics.Ports[agentmetrics.Key{Namespace: in.Pod.Namespace, Pod: in.Pod.Name, Port: p}]
		switch {
		case !ok || !c.HasUp:
			out = append(out, Finding{Reason: ReasonStateUnknown, Message: fmt.Sprintf("port %s: the node agent reports no state for it (has the app opened the port?)", p)})
		case c.Up:
			out = append(out, Finding{Reason: ReasonLinkUp, Message: fmt.Sprintf("port %s: up (rx %.0f, tx %.0f packets, %.0f drops)", p, c.RxPackets, c.TxPackets, c.Drops)})
		default:
			out = append(out, Finding{Reason: ReasonLinkDown, Message: fmt.Sprintf("port %s: wired but down: the memif connection is not established (are both apps running and opening their port? their logs say)", p)})
		}
	}
	return out
}
