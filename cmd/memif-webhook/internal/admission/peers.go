package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/podpolicy"
)

// APIPeers looks up a link's pods by their link label (as the scheduler's affinity does): pods
// that ended are left out, like the scheduler leaves them out.
func APIPeers(cs kubernetes.Interface) PeerFunc {
	return func(ctx context.Context, ns string, links []string) ([]podpolicy.Peer, error) {
		var out []podpolicy.Peer
		for _, l := range links {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podpolicy.LinkLabel(l)})
			if err != nil {
				return nil, fmt.Errorf("listing pods of link %s: %w", l, err)
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				out = append(out, podpolicy.Peer{Link: l, Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Terminating: p.DeletionTimestamp != nil})
			}
		}
		return out, nil
	}
}
