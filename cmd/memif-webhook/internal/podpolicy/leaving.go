package podpolicy

import (
	"sort"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
)

// checkLeaving refuses a pod joining a link whose placed pods are all terminating (a drain, an
// eviction, a rollout that replaces both ends). The link's pod affinity matches them until they
// are gone, so the scheduler would tie the new pod to the node they are leaving (cordoned, in a
// drain) and, as their deletion does not make a pod affinity easier to meet, not try it again
// for minutes (kube-scheduler's queueing hints: up to its 5-minute flush). Refused, the pod is
// created again by its controller (the ReplicaSet and StatefulSet controllers retry with
// backoff) once they are gone, and is then placed as a link's first pod, anywhere.
func checkLeaving(ps []ports.Port, peers []Peer) error {
	own := map[string]bool{}
	for _, l := range Links(ps) {
		own[l] = true
	}
	live := map[string]bool{}
	var leaving []Peer
	for _, p := range peers {
		if !own[p.Link] || p.Node == "" {
			continue
		}
		if p.Terminating {
			leaving = append(leaving, p)
		} else {
			live[p.Link] = true
		}
	}
	sort.Slice(leaving, func(i, j int) bool {
		a, b := leaving[i], leaving[j]
		return a.Link+"/"+a.Name < b.Link+"/"+b.Name
	})
	for _, p := range leaving {
		if !live[p.Link] {
			return refuse("metadata.annotations[%s]: link %s's pod %s/%s is terminating on node %s and no other pod of the link runs; a new pod of the link is admitted once it is gone (the scheduler would tie this pod to that node): retry, or let the pod's controller retry",
				names.PortsAnnotation, p.Link, p.Namespace, p.Name, p.Node)
		}
	}
	return nil
}
