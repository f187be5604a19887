package owner

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/memifnet/memifnet/internal/testutil"
)

// What a GET of the DaemonSet at SIGTERM decides, for each answer the API server can give while
// `kubectl delete -k` takes memifnet away (or does not).
func TestDecide(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	now := metav1.Now()
	ds := func(uid string, deleting bool) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
		if uid != "" {
			d.UID = types.UID(uid)
		}
		if deleting {
			d.DeletionTimestamp = &now
		}
		return d
	}
	for _, c := range []struct {
		name      string
		ds        *appsv1.DaemonSet
		err       error
		uninstall bool
		uid       types.UID // the one the agent read; "u1" when empty
	}{
		{"there", ds("", false), nil, false, ""},
		{"deleting", ds("", true), nil, true, ""},
		{"replaced", ds("u2", false), nil, true, ""},
		{"not found", nil, apierrors.NewNotFound(gr, "memifnet-node"), true, ""},
		{"service account gone", nil, apierrors.NewUnauthorized("token"), true, ""},
		{"RBAC gone", nil, apierrors.NewForbidden(gr, "memifnet-node", errors.New("no")), true, ""},
		{"API server down", nil, errors.New("dial tcp 10.96.0.1:443: connect: connection refused"), false, ""},
		{"timeout", nil, apierrors.NewTimeoutError("slow", 1), false, ""},
		{"never read, there", ds("u2", false), nil, false, "-"},
		{"never read, gone", nil, apierrors.NewNotFound(gr, "memifnet-node"), true, "-"},
	} {
		uid := c.uid
		switch uid {
		case "":
			uid = "u1"
		case "-":
			uid = ""
		}
		got, why := Decide(c.ds, c.err, uid)
		if got != c.uninstall {
			t.Errorf("%s: uninstall %v (%s), want %v", c.name, got, why, c.uninstall)
		}
	}
}

// The watch sees the DaemonSet's deletion, so the answer at SIGTERM no longer needs the API.
func TestWatcherSeesDeletion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "memifnet-system", Name: "memifnet-node", UID: "u1"}})
	w := Start(ctx, client, "memifnet-system", "memifnet-node", "", slog.Default())
	waitUntil(t, "the first GET of the DaemonSet", func() bool { return w.ownUID() != "" })
	if gone, why := w.Uninstalling(ctx); gone {
		t.Fatalf("before the deletion: uninstall (%s)", why)
	}
	if err := client.AppsV1().DaemonSets("memifnet-system").Delete(ctx, "memifnet-node", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the watch reporting the deletion", func() bool { return w.known() != "" })
	// Now the API server is unreachable (the client answers nothing useful): the watch decided.
	client.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if gone, why := w.Uninstalling(ctx); !gone {
		t.Errorf("after the deletion: uninstall %v (%s), want true", gone, why)
	}
}

// An upgrade changes the DaemonSet (a new image in its template, a new generation, the
// controller's status as it replaces the pods) but never deletes it: no event of it is taken for
// an uninstall. The DaemonSet is deleted last, so the first reason the watch records shows
// whether an update had been mistaken for one (the first reason is kept).
func TestWatcherUpgradeIsNoUninstall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "memifnet-system", Name: "memifnet-node", UID: "u1", Generation: 1}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "deviceplugin", Image: "localhost/memifnet/memifnet:v1"}}
	client := fake.NewClientset(ds)
	w := Start(ctx, client, "memifnet-system", "memifnet-node", "", slog.Default())
	waitUntil(t, "the first GET of the DaemonSet", func() bool { return w.ownUID() != "" })
	dss := client.AppsV1().DaemonSets("memifnet-system")
	up := ds.DeepCopy()
	up.Generation = 2
	up.Spec.Template.Spec.Containers[0].Image = "localhost/memifnet/memifnet:v2"
	if _, err := dss.Update(ctx, up, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []appsv1.DaemonSetStatus{
		{DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberUnavailable: 1, ObservedGeneration: 2},
		{DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberReady: 1, UpdatedNumberScheduled: 1, NumberAvailable: 1, ObservedGeneration: 2},
	} {
		up.Status = st
		if _, err := dss.UpdateStatus(ctx, up, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if gone, why := w.Uninstalling(ctx); gone {
		t.Fatalf("during the upgrade: uninstall (%s)", why)
	}
	if err := dss.Delete(ctx, "memifnet-node", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the watch reporting the deletion", func() bool { return w.known() != "" })
	if why := w.known(); why != "DaemonSet deleted" {
		t.Errorf("first reason recorded %q, want %q: an update of the DaemonSet was taken for an uninstall", why, "DaemonSet deleted")
	}
}

// waitUntil polls cond (the watcher works in the background and signals nothing a test could
// wait on) and fails the test if it is not true within 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, cond)
}
