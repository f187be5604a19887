package dra

import (
	"context"
	"maps"
	"slices"
	"time"
)

// WatchUnits re-checks the withheld units and the devices whose scrub failed every interval
// until ctx ends: a unit whose pages are back is made again, a device whose retried scrub works
// is clean, and both return to the slices.
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

// SyncUnits refills and re-scrubs what it can and, when a device went out of service or came
// back since the last publication, publishes the slices again and records an Event per
// transition.
func (d *Driver) SyncUnits(ctx context.Context) {
	d.state.Refill()
	d.umu.Lock()
	defer d.umu.Unlock()
	if d.state.track.Version() == d.version {
		return
	}
	if err := d.publishLocked(ctx); err != nil {
		d.log.Warn("dra: republish resource slices", "err", err)
	}
}

func (d *Driver) publishUnits(ctx context.Context) error {
	d.umu.Lock()
	defer d.umu.Unlock()
	return d.publishLocked(ctx)
}

// publishLocked publishes the devices in service and, once they are published, records the
// tracker's transitions as Events. The caller holds d.umu.
func (d *Driver) publishLocked(ctx context.Context) error {
	v := d.state.track.Version()
	if w := d.state.Withheld(); len(w) > 0 {
		d.log.Info("dra: publishing slices without withheld units", "units", slices.Sorted(maps.Keys(w)))
	}
	if f := d.state.ScrubFailures(); len(f) > 0 {
		d.log.Info("dra: publishing slices without devices whose scrub failed", "devices", slices.Sorted(maps.Keys(f)))
	}
	if err := d.publish(ctx, d.state.Resources()); err != nil {
		return err
	}
	d.version = v
	d.events.Transitions(d.state.track.Drain())
	return nil
}
