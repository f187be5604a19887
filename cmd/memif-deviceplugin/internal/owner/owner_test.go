package owner

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
	w := Start(ctx, client, "memifnet-system", "memifnet-node", slog.Default())
	for w.ownUID() == "" { // the first GET, in the background
		time.Sleep(10 * time.Millisecond)
	}
	if gone, why := w.Uninstalling(ctx); gone {
		t.Fatalf("before the deletion: uninstall (%s)", why)
	}
	if err := client.AppsV1().DaemonSets("memifnet-system").Delete(ctx, "memifnet-node", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.known() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not report the deletion in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Now the API server is unreachable (the client answers nothing useful): the watch decided.
	client.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if gone, why := w.Uninstalling(ctx); !gone {
		t.Errorf("after the deletion: uninstall %v (%s), want true", gone, why)
	}
}
