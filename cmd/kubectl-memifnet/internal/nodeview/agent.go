package nodeview

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/linkview"
)

// DefaultNodeLabel is the label the manifests' agent DaemonSets select nodes by (=true), unless
// the operator changed it (docs/install.md).
const DefaultNodeLabel = "memifnet.io/node"

// Agent is the memifnet node agent pod on the node.
type Agent struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Phase     string `json:"phase"`
	Ready     bool   `json:"ready"`
	Image     string `json:"image,omitempty"` // the deviceplugin container's
}

// AddAgent finds the node's agent among pods (those in namespace ns matching selector, bound to
// the node, not terminating) or, when none runs there, says why in AgentNote: a node the agent
// does not run on is not an error, it is how a cluster with a few CNF nodes is laid out.
func (rep *Report) AddAgent(node *corev1.Node, pods []corev1.Pod, ns string, selector labels.Selector) {
	for i := range pods {
		p := &pods[i]
		if p.Namespace != ns || p.Spec.NodeName != node.Name || !selector.Matches(labels.Set(p.Labels)) ||
			p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		a := &Agent{Namespace: p.Namespace, Pod: p.Name, Phase: string(p.Status.Phase)}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				a.Ready = c.Status == corev1.ConditionTrue
			}
		}
		for _, c := range p.Spec.Containers {
			if c.Name == "deviceplugin" || a.Image == "" {
				a.Image = c.Image
			}
		}
		rep.Agent, rep.AgentNote = a, ""
		return
	}
	rep.Agent = nil
	if node.Labels[DefaultNodeLabel] == "true" {
		rep.AgentNote = fmt.Sprintf("no memifnet node agent runs on this node although it is labelled %s=true: see kubectl -n %s get daemonsets,pods -o wide", DefaultNodeLabel, ns)
		return
	}
	rep.AgentNote = fmt.Sprintf("no memifnet node agent runs on this node: the agent's DaemonSets in %s do not select it (the manifests select nodes labelled %s=true); it offers no memif slots or pools and runs no memif link", ns, DefaultNodeLabel)
}

// AddLinks keeps the links with an end on the node (a link split over two nodes included).
func (rep *Report) AddLinks(links []linkview.Link) {
	rep.Links = []linkview.Link{}
	for _, l := range links {
		on := l.Node == rep.Node
		for _, e := range l.Ends {
			on = on || e.Node == rep.Node
		}
		if on {
			rep.Links = append(rep.Links, l)
		}
	}
}
