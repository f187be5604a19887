// Package owner tells the agent, when it is stopped, whether memifnet is being uninstalled from
// the node (its DaemonSet is deleted: clean the node) or the agent is only restarting (a crash,
// a liveness kill, a rollout: keep every slot and pool as it is, running links use them).
//
// With `kubectl delete -k` the namespace, service account and RBAC go away in some order while
// the agent terminates, so a question asked only at SIGTERM may get no answer. The agent
// therefore watches its DaemonSet from the start: the watch is authorized once, when it is
// opened, and the garbage collector deletes the agent's pod only after the DaemonSet is gone, so
// the deletion (or the deletionTimestamp of a foreground deletion) has arrived before SIGTERM.
// Should the watch have been down at that moment, one GET decides: the DaemonSet not found,
// deleting, or another one under the same name (a new install) is an uninstall; so are
// Unauthorized (the service account is gone) and Forbidden (the agent's RBAC is gone), as only an
// uninstall removes them. Anything else (the API server unreachable) keeps the node as a restart
// does: a slot never vanishes on a guess.
package owner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Watcher follows the agent's DaemonSet.
type Watcher struct {
	client    kubernetes.Interface
	namespace string
	name      string
	node      string // the agent's node; "" when unknown (then no node check)
	log       *slog.Logger

	mu   sync.Mutex
	uid  types.UID
	gone string // why the DaemonSet is known to be going away; "" while it is not
}

// Start watches the DaemonSet namespace/name until ctx ends. It does not wait for the API
// server: the first GET (the DaemonSet's UID) is retried in the background. node is the agent's
// node ("" if unknown): at SIGTERM a DaemonSet that no longer selects it means the node left
// memifnet (node.go).
func Start(ctx context.Context, client kubernetes.Interface, namespace, name, node string, log *slog.Logger) *Watcher {
	w := &Watcher{client: client, namespace: namespace, name: name, node: node, log: log}
	go w.run(ctx)
	return w
}

// first reads the DaemonSet until it answers, and returns its version.
func (w *Watcher) first(ctx context.Context) (string, bool) {
	for {
		ds, err := w.get(ctx)
		if err == nil {
			w.mu.Lock()
			w.uid = ds.UID
			w.mu.Unlock()
			w.observe(ds)
			return ds.ResourceVersion, true
		}
		w.log.Warn("owner: cannot read the agent's DaemonSet yet", "daemonset", w.namespace+"/"+w.name, "err", err)
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(2 * time.Second):
		}
	}
}

func (w *Watcher) ownUID() types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.uid
}

// observe notes a DaemonSet that is being deleted.
func (w *Watcher) observe(ds *appsv1.DaemonSet) {
	if ds.UID == w.ownUID() && ds.DeletionTimestamp != nil {
		w.setGone("DaemonSet is being deleted")
	}
}

func (w *Watcher) setGone(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone == "" {
		w.gone = why
		w.log.Info("uninstall: "+why, "daemonset", w.namespace+"/"+w.name)
	}
}

func (w *Watcher) known() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gone
}

// run keeps a watch open, reopening it (from the last version seen) when the API server ends it.
func (w *Watcher) run(ctx context.Context) {
	version, ok := w.first(ctx)
	if !ok {
		return
	}
	sel := fields.OneTermEqualSelector("metadata.name", w.name).String()
	for ctx.Err() == nil && w.known() == "" {
		wi, err := w.client.AppsV1().DaemonSets(w.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: version})
		if err != nil {
			w.log.Debug("owner: watch", "err", err)
			version = ""
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
			continue
		}
		// What happened before the watch opened (the version seen may be too old to replay):
		// one GET, now that no event can be missed. Only what it says of the DaemonSet counts
		// here; a refusal is weighed at SIGTERM.
		if ds, err := w.get(ctx); err == nil || apierrors.IsNotFound(err) {
			if gone, why := Decide(ds, err, w.ownUID()); gone {
				w.setGone(why)
			}
		}
		version = w.drain(wi, version)
	}
}

// drain reads events until the watch ends and returns the last version seen.
func (w *Watcher) drain(wi watch.Interface, version string) string {
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		ds, ok := ev.Object.(*appsv1.DaemonSet)
		if !ok {
			return "" // an error event (the version is too old): start over from now
		}
		version = ds.ResourceVersion
		switch uid := w.ownUID(); {
		case ev.Type == watch.Deleted && ds.UID == uid:
			w.setGone("DaemonSet deleted")
		case ds.UID != uid:
			w.setGone("DaemonSet replaced by another of the same name")
		default:
			w.observe(ds)
		}
	}
	return version
}

// Uninstalling reports whether memifnet is being uninstalled, and why (or why the node is kept).
func (w *Watcher) Uninstalling(ctx context.Context) (bool, string) {
	if why := w.known(); why != "" {
		return true, why
	}
	ds, err := w.get(ctx)
	gone, why := Decide(ds, err, w.ownUID())
	if gone || err != nil || w.node == "" {
		return gone, why
	}
	if left, whyNode := w.nodeLeft(ctx, ds); left || whyNode != "" {
		return left, whyNode
	}
	return false, why
}

// get asks the API server for the DaemonSet, briefly.
func (w *Watcher) get(ctx context.Context) (*appsv1.DaemonSet, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return w.client.AppsV1().DaemonSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
}

// Decide is the answer of a GET of the DaemonSet whose UID was uid ("" when the agent never
// read it: then any DaemonSet of the name is its own).
func Decide(ds *appsv1.DaemonSet, err error, uid types.UID) (bool, string) {
	switch {
	case apierrors.IsNotFound(err):
		return true, "DaemonSet not found"
	case apierrors.IsUnauthorized(err):
		return true, "the agent's service account is gone"
	case apierrors.IsForbidden(err):
		return true, "the agent's RBAC is gone"
	case err != nil:
		return false, fmt.Sprintf("cannot tell (%v): keeping the node's slots and pools as on a restart", err)
	case uid != "" && ds.UID != uid:
		return true, "DaemonSet replaced by another of the same name"
	case ds.DeletionTimestamp != nil:
		return true, "DaemonSet is being deleted"
	}
	return false, "DaemonSet still there: a restart"
}
