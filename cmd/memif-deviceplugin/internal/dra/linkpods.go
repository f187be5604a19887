package dra

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/portmetrics"
)

// Ports lists the socket ports of the prepared claims whose pod is known, for the per-port
// metrics. A claim names its pods (status.reservedFor) but not which pod uses which request:
// that is in each pod's container resources; resolvePods finds it.
func (d *Driver) Ports() []portmetrics.Port {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	var out []portmetrics.Port
	for _, c := range d.state.Prepared() {
		for _, dev := range c.Devices {
			pod := d.podOf[c.UID][dev.Request]
			if dev.Kind != KindSocket || dev.Status == nil || pod == "" {
				continue
			}
			out = append(out, portmetrics.Port{Namespace: c.Namespace, Pod: pod, Port: dev.Status.Port, Link: dev.Status.Link, Slot: dev.Name})
		}
	}
	return out
}

// resolvePods finds the pod of every request of c that has none yet, from the claim's
// consumers; claims gone from the state are forgotten.
func (d *Driver) resolvePods(ctx context.Context, claims []PreparedClaim) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if d.podOf == nil {
		d.podOf = map[string]map[string]string{}
	}
	live := map[string]bool{}
	for _, c := range claims {
		live[c.UID] = true
		known := d.podOf[c.UID]
		missing := false
		for _, dev := range c.Devices {
			missing = missing || (dev.Kind == KindSocket && known[dev.Request] == "")
		}
		if !missing {
			continue
		}
		pods, err := d.requestPods(ctx, c)
		if err != nil {
			d.log.Debug("dra: which pod uses which request", "claim", c.Namespace+"/"+c.Name, "err", err)
			continue
		}
		d.podOf[c.UID] = pods
	}
	for uid := range d.podOf {
		if !live[uid] {
			delete(d.podOf, uid)
		}
	}
}

// requestPods maps each request of the claim to the pod whose container asks for it (a
// container that asks for the whole claim gets every request).
func (d *Driver) requestPods(ctx context.Context, c PreparedClaim) (map[string]string, error) {
	claim, err := d.client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range claim.Status.ReservedFor {
		if r.Resource != "pods" || r.APIGroup != "" {
			continue
		}
		pod, err := d.client.CoreV1().Pods(c.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil || pod.UID != r.UID {
			continue // gone or replaced: its successor is reserved anew
		}
		for _, req := range podRequests(pod, claim) {
			if req == "" {
				for _, dev := range c.Devices {
					out[dev.Request] = pod.Name
				}
				continue
			}
			out[req] = pod.Name
		}
	}
	return out, nil
}

// podRequests lists the requests of claim that pod's containers use ("" for the whole claim).
func podRequests(pod *corev1.Pod, claim *resourceapi.ResourceClaim) []string {
	names := map[string]bool{} // the pod's names for this claim
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil && *rc.ResourceClaimName == claim.Name {
			names[rc.Name] = true
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil && *st.ResourceClaimName == claim.Name {
			names[st.Name] = true
		}
	}
	var out []string
	for _, ctr := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, cl := range ctr.Resources.Claims {
			if names[cl.Name] {
				out = append(out, cl.Request)
			}
		}
	}
	return out
}
