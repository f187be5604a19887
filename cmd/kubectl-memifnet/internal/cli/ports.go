package cli

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/explain"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/linkview"
)

// Port is one row of `kubectl memifnet ports POD`.
type Port struct {
	Name     string `json:"name"`
	Backend  string `json:"backend"`
	Link     string `json:"link,omitempty"`
	HostPort bool   `json:"hostPort,omitempty"`
	Claim    string `json:"claim,omitempty"`
	Role     string `json:"role,omitempty"`
	Mode     string `json:"mode,omitempty"`
	Queues   int    `json:"queues,omitempty"`
	RingSize int    `json:"ringSize,omitempty"`
	Buffer   int    `json:"bufferSize,omitempty"`
	ZeroCopy bool   `json:"zeroCopy,omitempty"`
	Peer     string `json:"peer,omitempty"` // pod/port, or host
	Status   string `json:"status"`
	State    string `json:"state,omitempty"`
}

// PodPortRows is the pod's ports: its annotation's, with the status of the link each is on,
// and its memifnet claims' socket requests.
func PodPortRows(pod *corev1.Pod, links []linkview.Link) []Port {
	var out []Port
	ps, _ := linkview.PodPorts(pod)
	for _, l := range links {
		for _, end := range l.Ends {
			if end.Pod != pod.Name || l.Namespace != pod.Namespace {
				continue
			}
			r := Port{Name: end.Port, Backend: l.Backend, Link: l.Name, HostPort: l.Host, Claim: l.Claim, Role: end.Role,
				Status: l.Status, State: l.State}
			for _, other := range l.Ends[:min(len(l.Ends), 2)] {
				if other.Pod != end.Pod || other.Port != end.Port {
					r.Peer = endName(other, l.Host)
				}
			}
			for _, p := range ps {
				if p.Name == end.Port {
					r.Mode, r.Queues, r.RingSize, r.Buffer, r.ZeroCopy = p.Mode, p.Queues, p.RingSize, p.BufferSize, p.ZeroCopy
				}
			}
			out = append(out, r)
		}
	}
	return out
}

func runPorts(ctx context.Context, e *env, args []string) error {
	in, err := e.gather(ctx, args[0])
	if err != nil {
		return err
	}
	links := linkview.Links(in.Pods, in.Claims)
	if in.Metrics != nil {
		for i := range links {
			if links[i].Node == in.Pod.Spec.NodeName {
				ApplyMetrics(&links[i], *in.Metrics, nil)
			}
		}
	}
	rows := PodPortRows(in.Pod, links)
	_, annErr := linkview.PodPorts(in.Pod)
	evs := memifEvents(in.Events)
	if e.printer != nil {
		v := struct {
			Namespace  string         `json:"namespace"`
			Pod        string         `json:"pod"`
			Node       string         `json:"node,omitempty"`
			Phase      string         `json:"phase"`
			Annotation string         `json:"annotationError,omitempty"`
			Ports      []Port         `json:"ports"`
			Events     []corev1.Event `json:"events"`
		}{Namespace: in.Pod.Namespace, Pod: in.Pod.Name, Node: in.Pod.Spec.NodeName, Phase: string(in.Pod.Status.Phase), Ports: rows, Events: evs}
		if annErr != nil {
			v.Annotation = annErr.Error()
		}
		return e.print(v)
	}
	// status.phase is free text to whoever may write pods/status (no enum is enforced): cleaned
	// like every other string from the cluster.
	fmt.Fprintln(e.out, clean(fmt.Sprintf("Pod %s/%s (%s, node %s)", in.Pod.Namespace, in.Pod.Name, in.Pod.Status.Phase, dash(in.Pod.Spec.NodeName))))
	if annErr != nil {
		fmt.Fprintf(e.out, "Annotation: %s\n", clean(annErr.Error()))
	}
	t := newTable(e.out)
	t.row("PORT", "BACKEND", "LINK", "PEER", "ROLE", "MODE", "QUEUES", "RING", "BUFFER", "ZEROCOPY", "STATUS", "STATE")
	for _, r := range rows {
		link := r.Link
		if r.HostPort {
			link = "<host-port>"
		}
		t.row(r.Name, r.Backend, link, dash(r.Peer), dash(r.Role), dash(r.Mode), num(r.Queues), num(r.RingSize), num(r.Buffer),
			strconv.FormatBool(r.ZeroCopy), r.Status, dash(r.State))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if in.EventsErr != nil {
		e.note("%v", in.EventsErr)
	}
	if len(evs) > 0 {
		fmt.Fprintln(e.out, "Events:")
		t := newTable(e.out)
		t.row("  TYPE", "REASON", "COUNT", "MESSAGE")
		for _, ev := range evs {
			t.row("  "+ev.Type, ev.Reason, strconv.Itoa(int(max(ev.Count, 1))), ev.Message)
		}
		return t.flush()
	}
	return nil
}

func num(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// memifEvents is the pod's Events that concern its memif ports.
func memifEvents(evs []corev1.Event) []corev1.Event {
	var out []corev1.Event
	for _, ev := range evs {
		switch ev.Reason {
		case explain.EventSandboxFailed, explain.EventDRAPrepare, explain.EventLinkPeerNodeFull, "FailedScheduling":
			out = append(out, ev)
		}
	}
	return out
}
