// Package explain tells the author of a link pod that cannot be scheduled why, in the link's
// terms: the pod must go where its link's peer runs (the webhook's pod affinity), so when that
// node has no free memifnet.io/socket the scheduler's generic "didn't match pod affinity rules"
// becomes an Event "link l1: peer pod ns/p2 runs on node n1, which has no free
// memifnet.io/socket (...)". Why is pure (tested); Loop finds the pods and records the Events.
package explain

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/memifnet/memifnet/cmd/internal/eventreason"
	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/admission"
	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/podpolicy"
	"github.com/memifnet/memifnet/internal/names"
)

// Reason is the Event reason (kubectl-memifnet's explain reads it).
const Reason = eventreason.LinkPeerNodeFull

// Slots is a node's socket slots as the scheduler counts them.
type Slots struct {
	Found             bool
	Allocatable, Used int64
}

// Unschedulable reports whether the scheduler gave up on the pod for now.
func Unschedulable(pod *corev1.Pod) (string, bool) {
	if pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending {
		return "", false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message, true
		}
	}
	return "", false
}

// Why explains, per link of the pod, why it cannot join its placed peers: their node is gone or
// has fewer free slots than the pod asks for. need is the pod's socket slots.
func Why(pod *corev1.Pod, need int64, peers []podpolicy.Peer, nodes map[string]Slots) []string {
	var out []string
	seen := map[string]bool{}
	sort.Slice(peers, func(i, j int) bool { return peers[i].Link+"/"+peers[i].Name < peers[j].Link+"/"+peers[j].Name })
	for _, p := range peers {
		if p.Node == "" || p.Name == pod.Name || seen[p.Link] {
			continue
		}
		s := nodes[p.Node]
		var msg string
		switch free := s.Allocatable - s.Used; {
		case !s.Found:
			msg = fmt.Sprintf("link %s: peer pod %s/%s is bound to node %s, which does not exist", p.Link, p.Namespace, p.Name, p.Node)
		case free < need:
			msg = fmt.Sprintf("link %s: peer pod %s/%s runs on node %s, which has %d free %s (%d allocatable, %d in use); this pod needs %d there",
				p.Link, p.Namespace, p.Name, p.Node, max(free, 0), names.SocketResource, s.Allocatable, s.Used, need)
		default:
			continue
		}
		seen[p.Link] = true
		out = append(out, msg)
	}
	return out
}

func socketLimits(pod *corev1.Pod) int64 {
	var n int64
	for _, c := range pod.Spec.Containers {
		q := c.Resources.Limits[names.SocketResource]
		n += q.Value()
	}
	return n
}

// PendingSelector selects the pods the scheduler has not placed: the only ones explained, and
// the only ones the Explainer's informer lists, watches and keeps.
const PendingSelector = "spec.nodeName=,status.phase=Pending"

// Explainer looks at pending link pods and records Events.
type Explainer struct {
	Client   kubernetes.Interface
	Recorder record.EventRecorder
	Log      *slog.Logger
	told     map[string]string // pod UID -> last message, so an Event is recorded once per change
	pending  corelisters.PodLister
	stuck    chan struct{} // a link pod the scheduler gave up on changed: pass now
}

// Start lists and then watches the unplaced pods (an informer: one LIST, then a WATCH, instead of
// a cluster-wide LIST every pass) and returns once its cache is filled; it runs until ctx ends.
func (e *Explainer) Start(ctx context.Context) error {
	inf := coreinformers.NewFilteredPodInformer(e.Client, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = PendingSelector })
	// The cache holds every unplaced pod of the cluster: keep what Pass reads, drop the rest.
	if err := inf.SetTransform(slim); err != nil {
		return err
	}
	e.stuck = make(chan struct{}, 1)
	poke := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Annotations[names.PortsAnnotation] != "" {
			if _, stuck := Unschedulable(pod); stuck {
				select {
				case e.stuck <- struct{}{}:
				default:
				}
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, obj any) { poke(obj) }}); err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("watching pending pods: %w", ctx.Err())
	}
	e.pending = corelisters.NewPodLister(inf.GetIndexer())
	return nil
}

// slim drops the managed fields of a cached pod (often its largest part; Pass never reads them).
func slim(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Loop starts the informer and runs Pass over its cache when a stuck link pod changes and every
// interval (a peer's node fills or empties without the pending pod changing) until ctx ends.
func (e *Explainer) Loop(ctx context.Context, interval time.Duration) {
	if err := e.Start(ctx); err != nil {
		if ctx.Err() == nil {
			e.Log.Error("explaining pending link pods", "err", err)
		}
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := e.Pass(ctx); err != nil && ctx.Err() == nil {
			e.Log.Warn("explaining pending link pods", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.stuck:
		}
	}
}

// Pass explains every unschedulable link pod once per distinct reason; it reads the pending pods
// from Start's cache.
func (e *Explainer) Pass(ctx context.Context) error {
	if e.told == nil {
		e.told = map[string]string{}
	}
	pods, err := e.pending.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pending pods: %w", err)
	}
	peersOf := admission.APIPeers(e.Client)
	nodes := map[string]Slots{}
	live := map[string]bool{}
	for _, pod := range pods {
		live[string(pod.UID)] = true
		if _, stuck := Unschedulable(pod); !stuck {
			continue
		}
		ps, ok, err := podpolicy.Ports(pod)
		if !ok || err != nil {
			continue
		}
		links := podpolicy.Links(ps)
		if len(links) == 0 {
			continue
		}
		peers, err := peersOf(ctx, pod.Namespace, links)
		if err != nil {
			return err
		}
		for _, p := range peers {
			if _, done := nodes[p.Node]; p.Node != "" && !done {
				if nodes[p.Node], err = e.slots(ctx, p.Node); err != nil {
					return err
				}
			}
		}
		for _, msg := range Why(pod, socketLimits(pod), peers, nodes) {
			if e.told[string(pod.UID)] == msg {
				continue
			}
			e.told[string(pod.UID)] = msg
			e.Recorder.Event(pod, corev1.EventTypeWarning, Reason, msg)
			e.Log.Info("explained", "pod", pod.Namespace+"/"+pod.Name, "why", msg)
		}
	}
	for uid := range e.told {
		if !live[uid] {
			delete(e.told, uid)
		}
	}
	return nil
}

// slots counts a node's socket slots: allocatable, and the limits of its pods that have not ended.
func (e *Explainer) slots(ctx context.Context, node string) (Slots, error) {
	n, err := e.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Slots{}, nil // Why says so
	}
	if err != nil {
		return Slots{}, fmt.Errorf("reading node %s: %w", node, err)
	}
	s := Slots{Found: true}
	q := n.Status.Allocatable[names.SocketResource]
	s.Allocatable = q.Value()
	pods, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return s, fmt.Errorf("listing pods of node %s: %w", node, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == node && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			s.Used += socketLimits(p)
		}
	}
	return s, nil
}
