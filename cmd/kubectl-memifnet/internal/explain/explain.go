// Package explain says why a memif pod's link is not up, from what the API server holds: the
// pod's and its peers' phases and scheduler conditions, the kubelet's Events (memif-cni's
// refusals arrive as FailedCreatePodSandBox), the admission webhook's LinkPeerNodeFull Events,
// the memifnet ResourceClaims, and the node agent's per-port metrics when it exports them. It is
// pure; the command fetches what the user may read and says what it could not.
package explain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/cmd/internal/eventreason"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/linkview"
	"github.com/memifnet/memifnet/internal/names"
)

// Reasons of findings.
const (
	ReasonNoMemifPorts     = "NoMemifPorts"
	ReasonBadAnnotation    = "BadAnnotation"
	ReasonEnded            = "Ended"
	ReasonNoSlot           = "NoSlot"
	ReasonNoPoolUnit       = "NoPoolUnit"
	ReasonNoDevice         = "NoDevice"
	ReasonPeerAffinity     = "PeerAffinity"
	ReasonUnschedulable    = "Unschedulable"
	ReasonPeerNodeFull     = eventreason.LinkPeerNodeFull // the webhook's Event reason, passed on
	ReasonPeerMissing      = "PeerMissing"
	ReasonPeerPending      = "PeerPending"
	ReasonPeerEnded        = "PeerEnded"
	ReasonSplitNodes       = "SplitNodes"
	ReasonLinkConflict     = "LinkConflict"
	ReasonCNIRefused       = "CNIRefused"
	ReasonDRAPrepare       = "DRAPrepareFailed"
	ReasonClaimMissing     = "ClaimMissing"
	ReasonWiring           = "Wiring"
	ReasonWired            = "Wired"
	ReasonLinkUp           = "LinkUp"
	ReasonLinkDown         = "LinkDown"
	ReasonStateUnknown     = "StateUnknown"
	ReasonEventsUnreadable = "EventsUnreadable"
	ReasonClaimsUnreadable = "ClaimsUnreadable"
)

// Event reasons read.
const (
	EventSandboxFailed    = "FailedCreatePodSandBox"        // kubelet: the runtime (and CNI) failed
	EventDRAPrepare       = "FailedPrepareDynamicResources" // kubelet: a DRA driver's Prepare failed
	EventLinkPeerNodeFull = eventreason.LinkPeerNodeFull    // the webhook's
)

// Finding is one reason, most important first.
type Finding struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	CNI     *CNIError `json:"cni,omitempty"`
}

// Input is what the command could read about a pod.
type Input struct {
	Pod       *corev1.Pod
	Pods      []corev1.Pod                // the pod's namespace: its link peers
	Claims    []resourceapi.ResourceClaim // the namespace's
	ClaimsErr error                       // the claims could not be read
	Events    []corev1.Event              // about the pod
	EventsErr error                       // Events could not be read
	// Metrics is the pod's node agent's per-port metrics; MetricsErr says why there are none.
	Metrics    *agentmetrics.Snapshot
	MetricsErr error
}

// Explain lists why the pod's links are (not) up.
func Explain(in Input) []Finding {
	pod := in.Pod
	var out []Finding
	add := func(reason, format string, a ...any) {
		out = append(out, Finding{Reason: reason, Message: fmt.Sprintf(format, a...)})
	}
	if in.EventsErr != nil {
		add(ReasonEventsUnreadable, "cannot read the pod's Events (%v): memif-cni refusals and the webhook's %s are not checked", in.EventsErr, EventLinkPeerNodeFull)
	}
	if in.ClaimsErr != nil && len(pod.Spec.ResourceClaims) > 0 {
		add(ReasonClaimsUnreadable, "cannot read ResourceClaims (%v): the pod's DRA links are not checked", in.ClaimsErr)
	}
	ps, perr := linkview.PodPorts(pod)
	if perr != nil {
		add(ReasonBadAnnotation, "%v (memif-cni refuses it with code 7; with the admission webhook installed such a pod is refused when created)", perr)
	}
	cps := podClaimPorts(in)
	links := podLinks(ps, pod)
	if perr == nil && len(ps) == 0 && len(cps) == 0 && len(links) == 0 && len(pod.Spec.ResourceClaims) == 0 {
		add(ReasonNoMemifPorts, "pod %s/%s asks for no memif port: no %s annotation, no %s claim", pod.Namespace, pod.Name, names.PortsAnnotation, names.DRADriver)
		return out
	}
	if linkview.Ended(pod) {
		add(ReasonEnded, "pod %s is %s%s: its ports are gone", pod.Name, phaseOf(pod), exitInfo(pod))
		return out
	}
	out = append(out, scheduling(pod, links)...)
	out = append(out, webhookEvents(in.Events)...)
	for _, l := range links {
		out = append(out, peers(pod, l, in.Pods)...)
	}
	out = append(out, claimFindings(in, cps)...)
	return append(out, wiring(in, ps, cps, blocking(out))...)
}

// blocking reports whether a finding other than a note about unreadable objects was made.
func blocking(fs []Finding) bool {
	for _, f := range fs {
		if f.Reason != ReasonEventsUnreadable && f.Reason != ReasonClaimsUnreadable {
			return true
		}
	}
	return false
}

func phaseOf(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "terminating"
	}
	return string(pod.Status.Phase)
}

// exitInfo is how the pod's containers ended, e.g. " (container perf: Error, exit code 1)".
func exitInfo(pod *corev1.Pod) string {
	var parts []string
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			s := fmt.Sprintf("container %s: %s, exit code %d", cs.Name, t.Reason, t.ExitCode)
			if m := strings.TrimSpace(t.Message); m != "" {
				s += ": " + m
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// podLinks is the links the pod names: its annotation's, and its labels' when the annotation
// does not parse.
func podLinks(ps []portsPort, pod *corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		if p.Link != "" && !seen[p.Link] {
			seen[p.Link] = true
			out = append(out, p.Link)
		}
	}
	var extra []string
	for l := range linkview.LinkLabels(pod) {
		if !seen[l] {
			extra = append(extra, l)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// scheduling explains a pod the scheduler has not placed, from its PodScheduled condition.
func scheduling(pod *corev1.Pod, links []string) []Finding {
	if linkview.Scheduled(pod) {
		return nil
	}
	msg := ""
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			msg = c.Message
		}
	}
	if msg == "" {
		return []Finding{{Reason: ReasonUnschedulable, Message: "pod is not scheduled yet (the scheduler has not reported on it)"}}
	}
	var out []Finding
	// A link pod held by its peer's node: the only node it may use is that one, so a shortage the
	// scheduler reports elsewhere says nothing and "no node has a free slot" would mislead (node
	// 1 may have room); PeerAffinity and the webhook's LinkPeerNodeFull say why.
	peerBound := strings.Contains(msg, "didn't match pod affinity rules") && len(links) > 0
	switch {
	case peerBound:
	case strings.Contains(msg, "Insufficient "+names.SocketResource):
		out = append(out, Finding{ReasonNoSlot, fmt.Sprintf("no node has a free %s slot for this pod: the scheduler says %q", names.SocketResource, msg), nil})
	case strings.Contains(msg, "Insufficient "+names.ResourcePrefix):
		out = append(out, Finding{ReasonNoPoolUnit, fmt.Sprintf("no node has the pool units this pod asks for: the scheduler says %q", msg), nil})
	case strings.Contains(msg, "cannot allocate all claims") || strings.Contains(msg, "resourceclaim"):
		out = append(out, Finding{ReasonNoDevice, fmt.Sprintf("no node has the memifnet devices the pod's claims ask for: the scheduler says %q", msg), nil})
	}
	if peerBound {
		out = append(out, Finding{ReasonPeerAffinity, fmt.Sprintf("the pod must run on its link peer's node (the webhook's pod affinity on %s%s) and cannot: the scheduler says %q",
			names.LinkLabelPrefix, links[0], msg), nil})
	}
	if len(out) == 0 {
		out = append(out, Finding{ReasonUnschedulable, fmt.Sprintf("the scheduler says %q", msg), nil})
	}
	return out
}

// webhookEvents passes on the webhook's LinkPeerNodeFull Events, newest first, once each.
func webhookEvents(evs []corev1.Event) []Finding {
	var out []Finding
	seen := map[string]bool{}
	for _, e := range newestFirst(evs) {
		if e.Reason == EventLinkPeerNodeFull && !seen[e.Message] {
			seen[e.Message] = true
			out = append(out, Finding{Reason: ReasonPeerNodeFull, Message: e.Message + " (the memifnet webhook's Event)"})
		}
	}
	return out
}

func eventTime(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if t.IsZero() {
		t = e.FirstTimestamp.Time
	}
	return t
}

func newestFirst(evs []corev1.Event) []*corev1.Event {
	out := make([]*corev1.Event, len(evs))
	for i := range evs {
		out[i] = &evs[i]
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(out[i]).After(eventTime(out[j])) })
	return out
}
