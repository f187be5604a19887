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
func (d *DeviceState) Withheld() map[string]error {
	out := map[string]error{}
	for _, p := range d.opts.Pools {
		maps.Copy(out, p.Units.Withheld())
	}
	return out
}

// Refill tries to make every withheld unit again (cheap while its pages are not back), scrubs
// again every device whose scrub failed, and returns those that are back. A device whose scrub
// failed is in no claim: the claim let go of it at Unprepare (or its Prepare failed), and a
// Prepare whose scrub works takes it out of the failed ones; d.mu keeps Prepare out meanwhile.
func (d *DeviceState) Refill() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var back []string
	for _, id := range slices.Sorted(maps.Keys(d.ScrubFailures())) {
		dev := PreparedDevice{Name: id, Kind: KindHugepage}
		if _, ok := d.slots[id]; ok {
			dev.Kind = KindSocket
		}
		if d.scrub(dev) == nil {
			back = append(back, id)
		}
	}
	for _, p := range d.opts.Pools {
		for _, id := range slices.Sorted(maps.Keys(p.Units.Withheld())) {
			err := p.Units.Scrub(id)
			switch {
			case err == nil:
				back = append(back, id)
			case !errors.Is(err, device.ErrWithheld):
				d.opts.Log.Warn("dra: refill a withheld unit", "unit", id, "err", err)
			}
		}
	}
	return back
}
