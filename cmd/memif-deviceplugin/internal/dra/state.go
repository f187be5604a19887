package dra

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/cmd/internal/linkdir"
	"github.com/memifnet/memifnet/cmd/internal/slotwire"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/cdi"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/internal/tmpfs"
)

// Device kinds (the "type" attribute of a device in its ResourceSlice).
const (
	KindSocket   = "socket"
	KindHugepage = "hugepage"
)

// CDIKind is the CDI kind of the per-claim specs: devices are memifnet.io/claim=<uid>-<device>.
const CDIKind = "memifnet.io/claim"

// Slots are the DRA driver's socket slots (slots.Provider).
type Slots interface {
	Units() []device.Unit
	Scrub(id string) error
	Dir(id string) string
}

// Pool is one of the DRA driver's hugepage pools.
type Pool struct {
	Name     string
	PageSize string // "2Mi"
	UnitSize int64
	Units    Units
}

// Units are a pool's unit files (pools.Provider). A unit whose scrub found its old file still
// held is withheld (Scrub's error wraps device.ErrWithheld) until a later Scrub makes it again.
type Units interface {
	Units() []device.Unit
	Scrub(id string) error
	Path(id string) string
	// Withheld are the units out of service, with the reason.
	Withheld() map[string]error
}

// Options are what the DRA driver needs: its name and node, its own slots and pools (made by
// the node agent from the config's dra section), the tmpfs limits of its link directories, and
// where it meets the kubelet.
type Options struct {
	DriverName string // memifnet.io
	NodeName   string // the ResourceSlice pool of the node's devices
	StateDir   string // <state>: the checkpoint and link directories go to <state>/dra
	SlotsDir   string // <state>/sockets
	Slots      Slots
	SlotBytes  int64 // a slot's tmpfs size, its capacity in the slices
	Pools      []Pool
	LinkLimits tmpfs.Limits
	CDI        cdi.Writer
	// KubeletDir holds the kubelet's plugins_registry/ and plugins/<driver>/ (the driver's socket).
	KubeletDir string
	// RecheckInterval is how often withheld units are re-checked (default 250ms).
	RecheckInterval time.Duration
	Log             *slog.Logger
}

// DeviceState prepares and unprepares claims. It is safe for concurrent use.
type DeviceState struct {
	opts  Options
	m     *metrics
	links linkdir.Dirs
	ckpt  checkpoint
	slots map[string]device.Unit // the driver's socket slots by name
	units map[string]*Pool       // the pool of each hugepage unit, by name

	mu     sync.Mutex
	claims map[string]PreparedClaim // by UID

	// track is which devices are out of service (withheld, scrub failed): every scrub's result
	// goes there, and the slices leave those devices out.
	track *device.Tracker
}

// NewDeviceState loads the checkpoint of claims prepared before a restart.
func NewDeviceState(opts Options) (*DeviceState, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.RecheckInterval == 0 {
		opts.RecheckInterval = 250 * time.Millisecond
	}
	d := &DeviceState{
		opts:  opts,
		links: linkdir.Dirs{Root: filepath.Join(opts.StateDir, names.DRASubdir, names.LinksSubdir), Limits: opts.LinkLimits},
		ckpt:  checkpoint{path: filepath.Join(opts.StateDir, names.DRASubdir, "claims.json")},
		slots: map[string]device.Unit{}, units: map[string]*Pool{},
		track: device.NewTracker(device.BackendDRA, opts.Log),
	}
	if opts.Slots != nil {
		for _, u := range opts.Slots.Units() {
			d.slots[u.ID] = u
		}
		d.track.Add(names.SocketResource, opts.Slots.Units())
	}
	for i := range opts.Pools {
		p := &opts.Pools[i]
		for _, u := range p.Units.Units() {
			d.units[u.ID] = p
		}
		d.track.Add(names.ResourcePrefix+p.Name, p.Units.Units())
		for id, err := range p.Units.Withheld() { // units the pool could not make at its start
			d.track.Withhold(id, err)
		}
	}
	claims, err := d.ckpt.load()
	if err != nil {
		return nil, err
	}
	d.claims = claims
	d.m = newMetrics()
	if len(claims) > 0 {
		opts.Log.Info("dra: claims prepared before the restart", "claims", len(claims))
		if err := d.rebaseLinks(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// rebaseLinks takes over the link mounts of a previous process: the same tmpfs has another mount
// id in this process's mount namespace (a restarted node agent is a new container), so each
// recorded link is matched by its file system and re-recorded with the id seen here. A link whose
// tmpfs is gone, or replaced by something else, keeps its record: Unprepare then leaves the
// foreign mount alone and reports it.
func (d *DeviceState) rebaseLinks() error {
	changed := false
	for uid, c := range d.claims {
		if c.LinkDir == "" || c.LinkMount.IsZero() {
			continue
		}
		cur, ok, err := d.links.Current(c.Namespace, c.LinkDir, c.LinkMount)
		if err != nil {
			return fmt.Errorf("claim %s/%s: link directory: %w", c.Namespace, c.Name, err)
		}
		if ok && cur != c.LinkMount {
			c.LinkMount = cur
			d.claims[uid] = c
			changed = true
		}
	}
	if changed {
		return d.ckpt.save(d.claims)
	}
	return nil
}

// Prepared returns the claims the driver holds as prepared (or half prepared), sorted by UID.
func (d *DeviceState) Prepared() []PreparedClaim {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]PreparedClaim, 0, len(d.claims))
	for _, c := range d.claims {
		out = append(out, c)
	}
	sortClaims(out)
	return out
}

func sortClaims(cs []PreparedClaim) {
	sort.Slice(cs, func(a, b int) bool { return cs[a].UID < cs[b].UID })
}

// Result is a prepared claim's devices and their CDI device IDs.
type Result struct {
	Claim PreparedClaim
	CDI   map[string][]string // device name -> CDI device IDs
}

// Prepare prepares the claim's devices on this node. A claim already prepared gets the same
// result again (the kubelet repeats Prepare after its own restart); a half-prepared one is
// undone and prepared anew. Bad parameters fail before any side effect, naming the field.
func (d *DeviceState) Prepare(claim *resourceapi.ResourceClaim) (_ Result, err error) {
	defer func(start time.Time) { d.m.observe(opPrepare, start, err) }(time.Now())
	d.mu.Lock()
	defer d.mu.Unlock()
	id := fmt.Sprintf("claim %s/%s", claim.Namespace, claim.Name)
	uid := string(claim.UID)
	if claim.Status.Allocation == nil {
		return Result{}, fmt.Errorf("%s: not allocated", id)
	}
	if old, ok := d.claims[uid]; ok {
		if old.Prepared {
			return d.result(old), nil
		}
		if err := d.undo(old); err != nil {
			return Result{}, fmt.Errorf("%s: undo an earlier, unfinished prepare: %w", id, err)
		}
	}
	plan, ports, err := d.plan(claim)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", id, err)
	}
	// Record the plan before the first side effect: whatever happens next, an Unprepare (or a
	// restart's repeated Prepare) knows what to undo.
	d.claims[uid] = plan
	if err := d.ckpt.save(d.claims); err != nil {
		delete(d.claims, uid)
		return Result{}, fmt.Errorf("%s: %w", id, err)
	}
	if err := d.wire(&plan, ports, consumer(claim)); err != nil {
		if uerr := d.undo(plan); uerr != nil {
			err = fmt.Errorf("%w (and undoing: %v)", err, uerr)
		}
		return Result{}, fmt.Errorf("%s: %w", id, err)
	}
	plan.Prepared = true
	d.claims[uid] = plan
	if err := d.ckpt.save(d.claims); err != nil {
		return Result{}, fmt.Errorf("%s: %w", id, err)
	}
	d.opts.Log.Info("dra: claim prepared", "claim", claim.Namespace+"/"+claim.Name, "uid", uid, "devices", len(plan.Devices))
	return d.result(plan), nil
}

// wire performs the plan: scrub every device (each hand-out is a fresh tmpfs or file), make the
// link's directory and mount it in both slots, write port.json (and a host port's host side),
// write the CDI spec. It records the link's tmpfs in plan (and the checkpoint) before mounting it
// anywhere. pod names the claim's consumer in the host side's files.
func (d *DeviceState) wire(plan *PreparedClaim, pp map[string]ports.Port, pod string) error {
	for _, dev := range plan.Devices {
		if err := d.scrub(dev); err != nil {
			return err
		}
	}
	secret := ""
	if plan.LinkDir != "" {
		mount, err := d.links.Make(plan.Namespace, plan.LinkDir)
		if err != nil {
			return fmt.Errorf("link directory: %w", err)
		}
		plan.LinkMount = mount
		d.claims[plan.UID] = *plan
		if err := d.ckpt.save(d.claims); err != nil {
			return err
		}
		if secret, err = ports.NewSecret(); err != nil {
			return err
		}
	}
	for _, dev := range plan.Devices {
		if dev.Kind != KindSocket {
			continue
		}
		if err := d.wireSlot(*plan, dev, pp[dev.Name], secret, pod); err != nil {
			return fmt.Errorf("slot %s (request %s): %w", dev.Name, dev.Request, err)
		}
	}
	return d.writeCDI(*plan)
}

func (d *DeviceState) wireSlot(plan PreparedClaim, dev PreparedDevice, p ports.Port, secret, pod string) error {
	slot, err := slotwire.OpenSlot(d.opts.SlotsDir, dev.Name)
	if err != nil {
		return err
	}
	defer slot.Close()
	spec := p.Spec(ports.ClaimOwner(plan.Namespace, plan.Name))
	spec.Socket, spec.Secret = dev.Status.Socket, secret
	if dev.Network != nil {
		spec.IPs = dev.Network.IPs // the claim's static addresses, checked in plan
	}
	if plan.LinkDir != "" {
		if err := slotwire.BindLink(slot, d.links, plan.Namespace, plan.LinkDir, plan.LinkMount); err != nil {
			return err
		}
	}
	if err := slotwire.WritePortSpec(slot, spec); err != nil {
		return err
	}
	if dev.Status.HostSocket == "" {
		return nil
	}
	return d.writeHost(plan, dev, spec, pod)
}

// consumer is namespace/name of the pod the claim is reserved for (the kubelet prepares only
// reserved claims); a claim shared by several pods names the first.
func consumer(claim *resourceapi.ResourceClaim) string {
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			return claim.Namespace + "/" + r.Name
		}
	}
	return claim.Namespace + "/(claim " + claim.Name + ")"
}

// cdiName is the per-claim CDI spec's file name (without .json).
func cdiName(uid string) string { return "memifnet.io-claim_" + uid }

func (d *DeviceState) writeCDI(plan PreparedClaim) error {
	spec := cdi.Spec{Kind: CDIKind}
	for _, dev := range plan.Devices {
		var e cdi.ContainerEdits
		switch dev.Kind {
		case KindSocket:
			// rbind: the link directory is a mount on <slot>/link; a plain bind would show the
			// container the empty directory beneath it.
			e.Mounts = []*cdi.Mount{{HostPath: d.opts.Slots.Dir(dev.Name), ContainerPath: names.ContainerDir + "/" + dev.Name, Options: []string{"rbind", "rw"}}}
			e.Env = []string{names.EnvSockets + "=" + dev.Name}
		case KindHugepage:
			cpath := names.ContainerPoolsDir + "/" + dev.Name
			e.Mounts = []*cdi.Mount{{HostPath: d.units[dev.Name].Units.Path(dev.Name), ContainerPath: cpath, Options: []string{"bind", "rw"}}}
			e.Env = []string{names.EnvPools + "=" + cpath}
		}
		spec.Devices = append(spec.Devices, cdi.Device{Name: plan.UID + "-" + dev.Name, ContainerEdits: e})
	}
	return d.opts.CDI.WriteNamed(cdiName(plan.UID), spec)
}

func (d *DeviceState) result(c PreparedClaim) Result {
	r := Result{Claim: c, CDI: map[string][]string{}}
	for _, dev := range c.Devices {
		r.CDI[dev.Name] = []string{cdi.QualifiedName(CDIKind, c.UID+"-"+dev.Name)}
	}
	return r
}

// scrub scrubs one device and records the result in the tracker: a failure takes the device
// out of the slices until a scrub works, a withheld unit until its pool makes it again.
func (d *DeviceState) scrub(dev PreparedDevice) error {
	var err error
	switch dev.Kind {
	case KindSocket:
		err = d.opts.Slots.Scrub(dev.Name)
	case KindHugepage:
		err = d.units[dev.Name].Units.Scrub(dev.Name)
	}
	d.track.Scrubbed(dev.Name, err)
	if err != nil {
		return fmt.Errorf("scrub %s: %w", dev.Name, err)
	}
	return nil
}

// Tracker is the record of the driver's devices out of service, for Events and metrics.
func (d *DeviceState) Tracker() *device.Tracker { return d.track }

// ScrubFailures are the devices out of service because their scrub failed, with the error. They
// are left out of the ResourceSlices until a retried scrub works.
func (d *DeviceState) ScrubFailures() map[string]error { return d.track.Out(device.ScrubFailed) }

// Unprepare undoes Prepare: the CDI spec goes, every device is scrubbed (a slot gets a fresh
// tmpfs, so the link mount and anything the pods left go with the old one), and the link's
// directory is unmounted. A claim the driver does not know is already unprepared.
func (d *DeviceState) Unprepare(uid string) (err error) {
	defer func(start time.Time) { d.m.observe(opUnprepare, start, err) }(time.Now())
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.claims[uid]
	if !ok {
		return nil
	}
	if err := d.undo(c); err != nil {
		return fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	d.opts.Log.Info("dra: claim unprepared", "claim", c.Namespace+"/"+c.Name, "uid", uid)
	return nil
}

// undo reverses every step of c, tolerating steps never done or undone already, and drops c
// from the checkpoint once all went well.
func (d *DeviceState) undo(c PreparedClaim) error {
	var errs []error
	errs = append(errs, d.opts.CDI.Remove(cdiName(c.UID)))
	for _, dev := range c.Devices {
		if dev.Status != nil && dev.Status.HostSocket != "" {
			errs = append(errs, d.removeHost(c, dev))
		}
		err := d.scrub(dev)
		if errors.Is(err, device.ErrWithheld) {
			// The unit's old file is still held: its pool withholds the unit (out of the
			// slices) until it can be made again. The claim lets go of it all the same, so
			// that its slots are free for the next claim.
			d.opts.Log.Warn("dra: unit withheld at unprepare", "claim", c.Namespace+"/"+c.Name, "unit", dev.Name, "err", err)
			continue
		}
		if errors.Is(err, device.ErrScrubFailed) {
			// Out of the slices until a retried scrub works (Refill), and every Prepare scrubs
			// first: no claim gets what the previous tenant left. The claim lets go of it, as
			// of a withheld unit, rather than stay stuck in Unprepare with its other devices.
			d.opts.Log.Warn("dra: device out of service at unprepare", "claim", c.Namespace+"/"+c.Name, "device", dev.Name, "err", err)
			continue
		}
		errs = append(errs, err)
	}
	switch {
	case c.LinkDir != "" && !c.LinkMount.IsZero():
		if err := d.links.Remove(c.Namespace, c.LinkDir, c.LinkMount); err != nil {
			errs = append(errs, fmt.Errorf("link directory: %w", err))
		}
	case c.LinkDir != "":
		// Planned, but its tmpfs never recorded: the agent may have died right after mounting it.
		if err := d.links.Clear(c.Namespace, c.LinkDir); err != nil {
			errs = append(errs, fmt.Errorf("link directory: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	delete(d.claims, c.UID)
	return d.ckpt.save(d.claims)
}
