// Package events records the node agent's Events on its Node, when it has an API client (the
// DRA driver's): the transitions of both backends' device trackers (device.Tracker), withheld
// pool units and devices out of service for a failed scrub.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/memifnet/memifnet/cmd/internal/eventreason"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
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

// Transitions records one Event per transition of a device tracker (device.Tracker): a unit
// withheld or refilled, a device whose scrub failed or that a retried scrub brought back. The
// messages begin "unit <id> " and "device <id> " (kubectl memifnet node keys on them); a
// device's shows whose it is ("device plugin memifnet.io/socket", "DRA").
func (r Recorder) Transitions(ctx context.Context, trs []device.Transition) {
	for _, tr := range trs {
		typ, reason, msg := describe(tr)
		r.Record(ctx, typ, reason, msg)
	}
}

// describe is the type, reason and message of tr's Event.
func describe(tr device.Transition) (typ, reason, msg string) {
	owner := "DRA"
	if tr.Backend == device.BackendDevicePlugin {
		owner = "device plugin " + tr.Resource
	}
	now := "back in service"
	if tr.Then != "" {
		now = "no longer " + strings.ReplaceAll(string(tr.State), "_", " ") + ", now " + strings.ReplaceAll(string(tr.Then), "_", " ")
	}
	switch {
	case tr.State == device.Withheld && tr.Out:
		// The pool's reason begins "unit <id> withheld" and names the holders it found.
		msg = "unit " + tr.Device + " withheld"
		if tr.Err != nil {
			msg = tr.Err.Error()
		}
		return corev1.EventTypeWarning, ReasonUnitWithheld, msg
	case tr.State == device.Withheld && tr.Then == "":
		return corev1.EventTypeNormal, ReasonUnitRefilled, "unit " + tr.Device + " is back in service: its previous tenant let go of its old file"
	case tr.State == device.Withheld:
		return corev1.EventTypeNormal, ReasonUnitRefilled, "unit " + tr.Device + " is " + now
	case tr.Out:
		return corev1.EventTypeWarning, ReasonScrubFailed,
			fmt.Sprintf("device %s (%s) is out of service until a retried scrub works: %v", tr.Device, owner, tr.Err)
	case tr.Then == "":
		return corev1.EventTypeNormal, ReasonRecovered, "device " + tr.Device + " (" + owner + ") is back in service: a retried scrub worked"
	default:
		return corev1.EventTypeNormal, ReasonRecovered, "device " + tr.Device + " (" + owner + ") is " + now
	}
}
