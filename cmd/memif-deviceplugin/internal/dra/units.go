package dra

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/events"
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
	d.events().Withheld(ctx, d.published, now)
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

func (d *Driver) events() events.Recorder {
	return events.Recorder{Client: d.client, Node: d.state.opts.NodeName, Component: d.state.opts.DriverName, Log: d.log}
}
