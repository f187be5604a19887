package dra

import (
	"errors"
	"maps"
	"slices"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
)

// Withheld are the driver's hugepage units that their pools keep out of service (a previous
// tenant still holds the unit's old file), with the reason. They are left out of the
// ResourceSlices until they are made again.
func (d *DeviceState) Withheld() map[string]error { return d.track.Out(device.Withheld) }

// Refill scrubs again every device out of service: a withheld unit is made again once its pages
// are back (cheaply refused until then), a device whose scrub failed is clean once a retry
// works. It returns those that are back. A device out of service is in no claim: the claim let
// go of it at Unprepare (or its Prepare failed), and a Prepare whose scrub works takes it back;
// d.mu keeps Prepare out meanwhile.
func (d *DeviceState) Refill() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.Withheld()
	maps.Copy(out, d.ScrubFailures())
	var back []string
	for _, id := range slices.Sorted(maps.Keys(out)) {
		dev := PreparedDevice{Name: id, Kind: KindHugepage}
		if _, ok := d.slots[id]; ok {
			dev.Kind = KindSocket
		}
		err := d.scrub(dev)
		switch {
		case err == nil:
			back = append(back, id)
		case !errors.Is(err, device.ErrWithheld) && !errors.Is(err, device.ErrScrubFailed):
			d.opts.Log.Warn("dra: scrub a device out of service", "device", id, "err", err)
		}
	}
	return back
}
