// Package events records the node agent's Events on its Node, when it has an API client (the
// DRA driver's): the withheld pool units and the devices out of service for a failed scrub, of
// both backends.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/memifnet/memifnet/cmd/internal/eventreason"
)

// Reasons of the Events about withheld units (kubectl-memifnet reads them: the values are
// cmd/internal/eventreason's).
const (
	ReasonUnitWithheld = eventreason.UnitWithheld
	ReasonUnitRefilled = eventreason.UnitRefilled
)

// Reasons of the Events about devices whose scrub failed (device.ErrScrubFailed).
const (
	ReasonScrubFailed = eventreason.ScrubFailed
	ReasonRecovered   = eventreason.Recovered
)

// Recorder records Events on the node's Node object, in namespace default (where the kubelet
// records its own). A nil Client records nothing.
type Recorder struct {
	Client    kubernetes.Interface
	Node      string
	Component string // e.g. memifnet.io
	Log       *slog.Logger
}

// Record records one Event; a failure is logged (the log has the same news).
func (r Recorder) Record(ctx context.Context, typ, reason, msg string) {
	if r.Client == nil {
		return
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		// Named as client-go's recorder names events: the object and a timestamp.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", r.Node, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: r.Node, UID: types.UID(r.Node)},
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		Source:              corev1.EventSource{Component: r.Component, Host: r.Node},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: r.Component,
		ReportingInstance:   r.Node,
	}
	if _, err := r.Client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil && r.Log != nil {
		r.Log.Warn("cannot record event", "reason", reason, "err", err)
	}
}

// Withheld records an Event per unit that is withheld in now and was not in before (with its
// reason), and per unit that was withheld before and is back now.
func (r Recorder) Withheld(ctx context.Context, before, now map[string]error) {
	for _, id := range slices.Sorted(maps.Keys(now)) {
		if before[id] == nil {
			r.Record(ctx, corev1.EventTypeWarning, ReasonUnitWithheld, now[id].Error())
		}
	}
	for _, id := range slices.Sorted(maps.Keys(before)) {
		if now[id] == nil {
			r.Record(ctx, corev1.EventTypeNormal, ReasonUnitRefilled, "unit "+id+" is back in service: its previous tenant let go of its old file")
		}
	}
}

// ScrubFailed records an Event per device out of service in now (its scrub failed) and not in
// before, with the error, and per device in before that is back in service now. backend says
// whose device it is ("device plugin memifnet.io/socket", "DRA"). The messages begin
// "device <id> ", as the withheld ones begin "unit <id> " (kubectl memifnet node keys on it).
func (r Recorder) ScrubFailed(ctx context.Context, backend string, before, now map[string]error) {
	for _, id := range slices.Sorted(maps.Keys(now)) {
		if before[id] == nil {
			r.Record(ctx, corev1.EventTypeWarning, ReasonScrubFailed,
				fmt.Sprintf("device %s (%s) is out of service until a retried scrub works: %v", id, backend, now[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(before)) {
		if now[id] == nil {
			r.Record(ctx, corev1.EventTypeNormal, ReasonRecovered, "device "+id+" ("+backend+") is back in service: a retried scrub worked")
		}
	}
}
