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
func (p *Plugin) WatchUnits(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.SyncUnits(ctx)
		}
	}
}

// SyncUnits refills what it can and, when the set of withheld units changed since the last
// publication, publishes the slices again and records an Event per unit withheld or back.
func (p *Plugin) SyncUnits(ctx context.Context) {
	p.d.Refill()
	p.umu.Lock()
	defer p.umu.Unlock()
	now := p.d.Withheld()
	if slices.Equal(slices.Sorted(maps.Keys(now)), slices.Sorted(maps.Keys(p.published))) {
		return
	}
	if err := p.publishLocked(ctx, now); err != nil {
		p.log.Warn("dra: republish resource slices", "err", err)
		return
	}
	for _, id := range slices.Sorted(maps.Keys(now)) {
		if p.published[id] == nil {
			p.event(ctx, corev1.EventTypeWarning, ReasonUnitWithheld, now[id].Error())
		}
	}
	for _, id := range slices.Sorted(maps.Keys(p.published)) {
		if now[id] == nil {
			p.event(ctx, corev1.EventTypeNormal, ReasonUnitRefilled, "unit "+id+" is back in the ResourceSlices: its previous tenant let go of its old file")
		}
	}
	p.published = now
}

func (p *Plugin) publishUnits(ctx context.Context) error {
	p.umu.Lock()
	defer p.umu.Unlock()
	now := p.d.Withheld()
	if err := p.publishLocked(ctx, now); err != nil {
		return err
	}
	p.published = now
	return nil
}

func (p *Plugin) publishLocked(ctx context.Context, withheld map[string]error) error {
	if len(withheld) > 0 {
		p.log.Info("dra: publishing slices without withheld units", "units", slices.Sorted(maps.Keys(withheld)))
	}
	return p.publish(ctx, p.d.Resources(p.slotBytes))
}

// event records an Event on the node (best effort: the log has the same).
func (p *Plugin) event(ctx context.Context, typ, reason, msg string) {
	if p.client == nil {
		return
	}
	node := p.d.opts.NodeName
	now := metav1.Now()
	ev := &corev1.Event{
		// Named as client-go's recorder names events: the object and a timestamp.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", node, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(node)},
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		Source:              corev1.EventSource{Component: p.d.opts.DriverName, Host: node},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: p.d.opts.DriverName,
		ReportingInstance:   node,
	}
	if _, err := p.client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		p.log.Warn("dra: cannot record event", "reason", reason, "err", err)
	}
}
