package dra

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/events"
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

// SyncUnits refills and re-scrubs what it can and, when the set of withheld units or of devices
// whose scrub failed changed since the last publication, publishes the slices again and records
// an Event per device out of service or back.
func (d *Driver) SyncUnits(ctx context.Context) {
	d.state.Refill()
	d.umu.Lock()
	defer d.umu.Unlock()
	now, failed := d.state.Withheld(), d.state.ScrubFailures()
	if sameKeys(now, d.published) && sameKeys(failed, d.failed) {
		return
	}
	if err := d.publishLocked(ctx, now, failed); err != nil {
		d.log.Warn("dra: republish resource slices", "err", err)
		return
	}
	d.events().Withheld(ctx, d.published, now)
	d.events().ScrubFailed(ctx, "DRA", d.failed, failed)
	d.published, d.failed = now, failed
}

func sameKeys(a, b map[string]error) bool {
	return slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
}

func (d *Driver) publishUnits(ctx context.Context) error {
	d.umu.Lock()
	defer d.umu.Unlock()
	now, failed := d.state.Withheld(), d.state.ScrubFailures()
	if err := d.publishLocked(ctx, now, failed); err != nil {
		return err
	}
	d.published, d.failed = now, failed
	return nil
}

func (d *Driver) publishLocked(ctx context.Context, withheld, failed map[string]error) error {
	if len(withheld) > 0 {
		d.log.Info("dra: publishing slices without withheld units", "units", slices.Sorted(maps.Keys(withheld)))
	}
	if len(failed) > 0 {
		d.log.Info("dra: publishing slices without devices whose scrub failed", "devices", slices.Sorted(maps.Keys(failed)))
	}
	return d.publish(ctx, d.state.Resources())
}

func (d *Driver) events() events.Recorder {
	return events.Recorder{Client: d.client, Node: d.state.opts.NodeName, Component: d.state.opts.DriverName, Log: d.log}
}
