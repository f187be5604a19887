// Package resource turns a Provider into what the kubelet's device plugin
// API needs: a device list with health, Allocate with scrub-before-reuse,
// NUMA-aware preferred allocation, and background reclaim of devices no pod
// holds any more.
package resource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/cdi"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/numa"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/ledger"
)

// Stats are counters for metrics.
type Stats struct {
	Allocations     uint64 // container allocations
	SyncScrubs      uint64 // scrubs done inside Allocate
	BackgroundScrub uint64 // scrubs done by reclaim
	ScrubErrors     uint64
	Healthy         int
	Unhealthy       int
	Withheld        int // out of service: a previous tenant holds what they were made of
	ScrubFailed     int // out of service: their scrub failed, until a retry works
	Dirty           int
}

// Resource serves one Provider. It is safe for concurrent use.
type Resource struct {
	p   Provider
	led *ledger.Ledger
	log *slog.Logger
	cdi *cdi.Writer

	units map[string]device.Unit
	locks map[string]*sync.Mutex // one per device: scrub and hand-out exclude each other

	// track is which devices are out of service (withheld, scrub failed) and why: every scrub's
	// result goes there, and Allocate refuses a device whose scrub failed until a retry works.
	track *device.Tracker

	mu      sync.Mutex
	health  map[string]error
	changed chan struct{} // closed and replaced when health changes

	allocations, syncScrubs, bgScrubs atomic.Uint64
}

// New checks every device once. With cdiWriter set it also writes the CDI
// spec, and Allocate then names CDI devices instead of returning mounts.
func New(p Provider, led *ledger.Ledger, log *slog.Logger, cdiWriter *cdi.Writer) (*Resource, error) {
	r := &Resource{
		p: p, led: led, log: log.With("resource", p.Resource()), cdi: cdiWriter,
		units: map[string]device.Unit{}, locks: map[string]*sync.Mutex{},
		health: map[string]error{}, changed: make(chan struct{}),
		track: device.NewTracker(device.BackendDevicePlugin, log.With("resource", p.Resource())),
	}
	r.track.Add(p.Resource(), p.Units())
	for _, u := range p.Units() {
		r.units[u.ID] = u
		r.locks[u.ID] = &sync.Mutex{}
	}
	r.CheckHealth()
	if cdiWriter != nil {
		spec := cdi.Spec{Kind: p.Resource()}
		for _, u := range p.Units() {
			m := p.Mount(u.ID)
			// rbind: a slot carries the CNI's link mount at <slot>/link; a plain bind would show
			// the container the empty directory beneath it, which the pod could then replace.
			opts := []string{"rbind", "rw"}
			if m.ReadOnly {
				opts[1] = "ro"
			}
			spec.Devices = append(spec.Devices, cdi.Device{Name: u.ID, ContainerEdits: cdi.ContainerEdits{
				Mounts: []*cdi.Mount{{HostPath: m.Host, ContainerPath: m.Container, Options: opts}},
			}})
		}
		if err := cdiWriter.Write(spec); err != nil {
			return nil, fmt.Errorf("resource %s: %w", p.Resource(), err)
		}
	}
	return r, nil
}

// Name is the extended resource name.
func (r *Resource) Name() string { return r.p.Resource() }

// Tracker is the record of the resource's devices out of service, for Events and metrics.
func (r *Resource) Tracker() *device.Tracker { return r.track }

// CheckHealth checks every device, rebuilds a damaged one that no pod holds, scrubs again one
// whose scrub failed, and wakes watchers when anything changed. A device being scrubbed or
// allocated right now keeps its last health: a scrub replaces the device, and a check in the
// middle would see it missing.
func (r *Resource) CheckHealth() {
	changed := false
	for _, u := range r.p.Units() {
		l := r.locks[u.ID]
		if !l.TryLock() {
			continue
		}
		var err error
		if r.scrubFailure(u.ID) != nil {
			err = r.retryScrub(u.ID)
		} else if err = r.p.Check(u.ID); err != nil {
			err = r.repair(u.ID, err)
		}
		l.Unlock()
		if r.setHealth(u.ID, err) {
			changed = true
		}
	}
	if changed {
		r.notify()
	}
}

// setHealth records a device's health and reports whether it changed (logged, except the
// first check of each device).
func (r *Resource) setHealth(id string, err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, seen := r.health[id]
	r.health[id] = err
	if seen && (old == nil) == (err == nil) {
		return false
	}
	if seen && err != nil {
		r.log.Warn("device unhealthy", "device", id, "err", err)
	} else if seen {
		r.log.Info("device healthy again", "device", id)
	}
	return true
}

// repair rebuilds a damaged device that is not handed out (scrub makes a new one), and returns
// nil when that worked, else the damage. A handed-out device is left alone: a pod may be using
// it. A withheld device is retried even when dirty: it has no file a pod could use, and the
// provider refuses the retry cheaply until what it needs is back; made again, it is clean. A
// rebuild whose scrub fails takes the device out of service as any failed scrub does. The caller
// holds the device's lock.
func (r *Resource) repair(id string, damage error) error {
	e, dirty := r.led.Dirty(id)
	withheld := errors.Is(damage, device.ErrWithheld)
	if dirty && !withheld {
		return damage
	}
	if err := r.scrub(id); err != nil {
		if errors.Is(err, device.ErrWithheld) {
			return err
		}
		// Out of service (scrub): the health check retries the scrub from now on.
		return fmt.Errorf("%w; rebuilding it failed: %w", damage, err)
	}
	if err := r.p.Check(id); err != nil {
		return err
	}
	if dirty {
		r.led.Clean(id, e.AllocatedAt)
		if err := r.led.Save(); err != nil {
			r.log.Warn("save state", "err", err)
		}
	}
	r.log.Info("device rebuilt", "device", id, "damage", damage.Error())
	return nil
}

// scrub scrubs a device and records the result: withheld, back in service, or out of service
// for any other failure (the previous tenant's traces may still be there, so it is reported
// unhealthy, the kubelet allocates it to no pod and Allocate refuses it until a retried scrub
// works). The caller holds the device's lock.
func (r *Resource) scrub(id string) error {
	err := r.p.Scrub(id)
	if err != nil && !errors.Is(err, device.ErrWithheld) {
		r.track.Fail(id, err)
	} else {
		r.track.Scrubbed(id, err)
	}
	return err
}

// scrubFailure is why the device is out of service for a failed scrub, or nil.
func (r *Resource) scrubFailure(id string) error {
	if st, err := r.track.State(id); st == device.ScrubFailed {
		return err
	}
	return nil
}

// ScrubFailures are the devices out of service because their scrub failed, with the error.
func (r *Resource) ScrubFailures() map[string]error { return r.track.Out(device.ScrubFailed) }

// retryScrub scrubs a device whose scrub failed again, and returns its health. The device is no
// pod's: Allocate refused it from the failure on (a failure inside Allocate failed that
// allocation), and Reclaim scrubs only devices no pod holds. When the scrub works the device is
// clean and back in service; a pool unit that is withheld now leaves it to the withheld path.
// The caller holds the device's lock.
func (r *Resource) retryScrub(id string) error {
	if err := r.scrub(id); err != nil {
		return err
	}
	if err := r.p.Check(id); err != nil {
		r.track.Fail(id, err)
		return err
	}
	if e, dirty := r.led.Dirty(id); dirty {
		r.led.Clean(id, e.AllocatedAt)
		if err := r.led.Save(); err != nil {
			r.log.Warn("save state", "err", err)
		}
	}
	r.bgScrubs.Add(1)
	return nil
}

func (r *Resource) notify() {
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// WatchHealth re-checks every interval until ctx ends.
func (r *Resource) WatchHealth(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.CheckHealth()
		}
	}
}

// Devices is the current device list and a channel closed at the next
// change, for ListAndWatch.
func (r *Resource) Devices() ([]*pluginapi.Device, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*pluginapi.Device, 0, len(r.units))
	for _, u := range r.p.Units() {
		h := pluginapi.Healthy
		if r.health[u.ID] != nil {
			h = pluginapi.Unhealthy
		}
		out = append(out, &pluginapi.Device{
			ID: u.ID, Health: h,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(u.Node)}}},
		})
	}
	return out, r.changed
}

// Options are the plugin options the kubelet asks for.
func (r *Resource) Options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}

// Preferred keeps each container's devices on one NUMA node, preferring
// clean devices so that Allocate has nothing to scrub.
func (r *Resource) Preferred(req *pluginapi.PreferredAllocationRequest) *pluginapi.PreferredAllocationResponse {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		cands := make([]numa.Candidate, 0, len(cr.AvailableDeviceIDs))
		for _, id := range cr.AvailableDeviceIDs {
			u, ok := r.units[id]
			if !ok {
				continue
			}
			_, dirty := r.led.Dirty(id)
			cands = append(cands, numa.Candidate{ID: id, Node: u.Node, Clean: !dirty})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{
			DeviceIDs: numa.Prefer(cands, cr.MustIncludeDeviceIDs, int(cr.AllocationSize)),
		})
	}
	return resp
}

// Allocate scrubs whatever of the requested devices is still dirty, records
// them as handed out and returns mounts (or CDI names) and env per
// container. Any unknown or unhealthy device fails the whole request, as
// the API asks.
func (r *Resource) Allocate(req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	var all []string
	seen := map[string]bool{}
	for _, cr := range req.ContainerRequests {
		for _, id := range cr.DevicesIds {
			if _, ok := r.units[id]; !ok {
				return nil, fmt.Errorf("allocate %s: unknown device %q", r.Name(), id)
			}
			r.mu.Lock()
			herr := r.health[id]
			r.mu.Unlock()
			if herr != nil {
				return nil, fmt.Errorf("allocate %s: device %s unhealthy: %w", r.Name(), id, herr)
			}
			if !seen[id] {
				seen[id] = true
				all = append(all, id)
			}
		}
	}
	// A fixed lock order keeps concurrent Allocates from deadlocking.
	sort.Strings(all)
	for _, id := range all {
		r.locks[id].Lock()
	}
	defer func() {
		for _, id := range all {
			r.locks[id].Unlock()
		}
	}()
	for _, id := range all {
		// A background scrub may have failed between the health check above and the lock:
		// the device is out of service, and its retry must never run under a pod.
		if err := r.scrubFailure(id); err != nil {
			return nil, fmt.Errorf("allocate %s: device %s unhealthy: %w", r.Name(), id, err)
		}
	}
	for _, id := range all {
		if _, dirty := r.led.Dirty(id); !dirty {
			continue
		}
		if err := r.scrub(id); err != nil {
			r.markUnhealthy(id, err) // withheld, or out of service
			return nil, fmt.Errorf("allocate %s: %w", r.Name(), err)
		}
		r.syncScrubs.Add(1)
	}
	if err := r.led.Allocated(all, time.Now()); err != nil {
		return nil, fmt.Errorf("allocate %s: %w", r.Name(), err)
	}
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		env, err := r.p.Grant(cr.DevicesIds)
		if err != nil {
			return nil, fmt.Errorf("allocate %s: %w", r.Name(), err)
		}
		car := &pluginapi.ContainerAllocateResponse{Envs: env}
		for _, id := range cr.DevicesIds {
			if r.cdi != nil {
				car.CdiDevices = append(car.CdiDevices, &pluginapi.CDIDevice{Name: cdi.QualifiedName(r.Name(), id)})
				continue
			}
			m := r.p.Mount(id)
			car.Mounts = append(car.Mounts, &pluginapi.Mount{HostPath: m.Host, ContainerPath: m.Container, ReadOnly: m.ReadOnly})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, car)
		r.allocations.Add(1)
	}
	r.log.Debug("allocated", "devices", all)
	return resp, nil
}

func (r *Resource) markUnhealthy(id string, err error) {
	if r.setHealth(id, err) {
		r.notify()
	}
}

// Reclaim scrubs, in the background, dirty devices that no pod holds: not
// in inUse (from a PodResources List that started at listedAt) and handed
// out more than grace before it, so that a device allocated just before or
// during the List (which the kubelet records after Allocate returns) is
// never taken for free. It returns how many devices it scrubbed.
func (r *Resource) Reclaim(ctx context.Context, inUse map[string]bool, listedAt time.Time, grace time.Duration) int {
	cutoff := listedAt.Add(-grace)
	n := 0
	ids := r.led.DirtyIDs()
	order := make([]string, 0, len(ids))
	for id := range ids {
		order = append(order, id)
	}
	sort.Strings(order)
	for _, id := range order {
		if ctx.Err() != nil {
			break
		}
		e := ids[id]
		if inUse[id] || e.AllocatedAt.After(cutoff) {
			continue
		}
		l := r.locks[id]
		if l == nil {
			continue
		}
		// Wait out a health check or an Allocate; an Allocate in between makes the entry differ.
		l.Lock()
		// A device whose scrub failed is the health check's to retry: each failure counts once.
		if cur, dirty := r.led.Dirty(id); dirty && cur == e && r.scrubFailure(id) == nil {
			switch err := r.scrub(id); {
			case err != nil:
				// Withheld (the provider logged why) or out of service: the health check retries
				// it. Left healthy and dirty, the kubelet would keep picking it and Allocate would
				// keep failing its pods.
				r.markUnhealthy(id, err)
			default:
				r.led.Clean(id, e.AllocatedAt)
				r.bgScrubs.Add(1)
				n++
			}
		}
		l.Unlock()
	}
	if n > 0 {
		if err := r.led.Save(); err != nil {
			r.log.Warn("save state", "err", err)
		}
		r.log.Debug("reclaimed", "devices", n)
	}
	return n
}

// Stats returns counters and gauges for metrics.
func (r *Resource) Stats() Stats {
	s := Stats{
		Allocations: r.allocations.Load(), SyncScrubs: r.syncScrubs.Load(),
		BackgroundScrub: r.bgScrubs.Load(), Dirty: len(r.led.DirtyIDs()),
	}
	for _, n := range r.track.Counts() {
		s.ScrubErrors += n.Errors
		s.Withheld += n.Out[device.Withheld]
		s.ScrubFailed += n.Out[device.ScrubFailed]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.health {
		if err == nil {
			s.Healthy++
		} else {
			s.Unhealthy++
		}
	}
	return s
}
