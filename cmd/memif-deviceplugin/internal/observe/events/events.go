// Package events records the node agent's Events on its Node, when it has an API client (the
// DRA driver's): the transitions of both backends' device trackers (device.Tracker), withheld
// pool units and devices out of service for a failed scrub.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

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

// actions says what the agent was doing when it saw each reason (events.k8s.io/v1 asks for one).
var actions = map[string]string{
	ReasonUnitWithheld: "Scrub", ReasonUnitRefilled: "Refill",
	ReasonScrubFailed: "Scrub", ReasonRecovered: "Scrub",
}

// noteLimit is the API server's limit on an Event's note (message) in events.k8s.io/v1: a longer
// one is refused, and the Event lost.
const noteLimit = 1024

// Recorder records Events on the node's Node object, in namespace default (where the kubelet
// records its own), through client-go's events recorder (events.k8s.io/v1): it sends them in the
// background, retries while the API server is unreachable, and turns an Event repeated within 6
// minutes into a series on one object instead of a new object each time. A nil *Recorder
// records nothing.
type Recorder struct {
	rec  events.EventRecorder
	node *corev1.ObjectReference
	stop func()
}

// NewRecorder starts a recorder for node as component (the reporting controller, e.g. the DRA
// driver's name); it returns nil for a nil client. The sink's failures go to log.
func NewRecorder(client kubernetes.Interface, node, component string, log *slog.Logger) *Recorder {
	if client == nil {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.FromSlogHandler(log.Handler())))
	bc := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	// Cannot fail: it fails only when the broadcaster was shut down.
	_ = bc.StartRecordingToSinkWithContext(ctx)
	return &Recorder{
		rec: bc.NewRecorder(scheme.Scheme, component),
		// A Node's UID is its name to the kubelet's Events too: no GET of the Node for it.
		node: &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(node)},
		stop: func() { bc.Shutdown(); cancel() },
	}
}

// Shutdown stops the recorder; Events not yet sent are dropped.
func (r *Recorder) Shutdown() {
	if r != nil {
		r.stop()
	}
}

// Record records one Event; the recorder sends it in the background.
func (r *Recorder) Record(typ, reason, msg string) {
	if r == nil {
		return
	}
	action, ok := actions[reason]
	if !ok {
		action = reason // the API server refuses an Event without one
	}
	r.rec.Eventf(r.node, nil, typ, reason, action, "%s", truncate(msg))
}

// truncate cuts msg to the API server's note limit at a rune boundary, marked " ...".
func truncate(msg string) string {
	if len(msg) <= noteLimit {
		return msg
	}
	const mark = " ..."
	cut := noteLimit - len(mark)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + mark
}

// Transitions records one Event per transition of a device tracker (device.Tracker): a unit
// withheld or refilled, a device whose scrub failed or that a retried scrub brought back. The
// messages begin "unit <id> " and "device <id> " (kubectl memifnet node keys on them); a
// device's shows whose it is ("device plugin memifnet.io/socket", "DRA").
func (r *Recorder) Transitions(trs []device.Transition) {
	for _, tr := range trs {
		typ, reason, msg := describe(tr)
		r.Record(typ, reason, msg)
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
