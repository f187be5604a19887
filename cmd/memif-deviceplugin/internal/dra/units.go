package dra

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Event reasons of a withheld unit, on the node's Node object.
const (
	ReasonUnitWithheld = "PoolUnitWithheld"
	ReasonUnitRefilled = "PoolUnitRefilled"
)

// WatchUnits re-checks the withheld units every interval until ctx ends: a unit whose pages are
// back is made again and returns to the slices.
func (d *Driver) WatchUnits(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.SyncUnits(ctx)
		}
	}
}

// SyncUnits refills what it can and, when the set of withheld units changed since the last
// publication, publishes the slices again and records an Event per unit withheld or back.
func (d *Driver) SyncUnits(ctx context.Context) {
	d.state.Refill()
	d.umu.Lock()
	defer d.umu.Unlock()
	now := d.state.Withheld()
	if slices.Equal(slices.Sorted(maps.Keys(now)), slices.Sorted(maps.Keys(d.published))) {
		return
	}
	if err := d.publishLocked(ctx, now); err != nil {
		d.log.Warn("dra: republish resource slices", "err", err)
		return
	}
	for _, id := range slices.Sorted(maps.Keys(now)) {
		if d.published[id] == nil {
			d.event(ctx, corev1.EventTypeWarning, ReasonUnitWithheld, now[id].Error())
		}
	}
	for _, id := range slices.Sorted(maps.Keys(d.published)) {
		if now[id] == nil {
			d.event(ctx, corev1.EventTypeNormal, ReasonUnitRefilled, "unit "+id+" is back in the ResourceSlices: its previous tenant let go of its old file")
		}
	}
	d.published = now
}

func (d *Driver) publishUnits(ctx context.Context) error {
	d.umu.Lock()
	defer d.umu.Unlock()
	now := d.state.Withheld()
	if err := d.publishLocked(ctx, now); err != nil {
		return err
	}
	d.published = now
	return nil
}

func (d *Driver) publishLocked(ctx context.Context, withheld map[string]error) error {
	if len(withheld) > 0 {
		d.log.Info("dra: publishing slices without withheld units", "units", slices.Sorted(maps.Keys(withheld)))
	}
	return d.publish(ctx, d.state.Resources())
}

// event records an Event on the node (best effort: the log has the same).
func (d *Driver) event(ctx context.Context, typ, reason, msg string) {
	if d.client == nil {
		return
	}
	node := d.state.opts.NodeName
	now := metav1.Now()
	ev := &corev1.Event{
		// Named as client-go's recorder names events: the object and a timestamp.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", node, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(node)},
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		Source:              corev1.EventSource{Component: d.state.opts.DriverName, Host: node},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: d.state.opts.DriverName,
		ReportingInstance:   node,
	}
	if _, err := d.client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		d.log.Warn("dra: cannot record event", "reason", reason, "err", err)
	}
}
