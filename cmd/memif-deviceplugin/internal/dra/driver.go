// Package dra is memif-deviceplugin's Dynamic Resource Allocation driver (resource.k8s.io/v1):
// it publishes the node's DRA socket slots and hugepage units as devices in ResourceSlices, and
// prepares allocated claims: a claim with two socket devices is one memif link (its two requests
// are the link's two ends, shared by the two pods), one with a single socket device is a host
// port, and hugepage units are handed out as files. Prepare scrubs every device (a fresh tmpfs
// or file), wires the link, writes port.json and a CDI spec per claim; Unprepare scrubs again.
// Both are idempotent and survive a restart of the node agent (a checkpoint of prepared claims).
// See docs/dra.md.
package dra

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/cdi"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/resource"
	"github.com/memifnet/memifnet/internal/linkdir"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/internal/slotwire"
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
	Units() []resource.Unit
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

// Units are a pool's unit files (pools.Provider).
type Units interface {
	Units() []resource.Unit
	Scrub(id string) error
	Path(id string) string
}

// Options configure a Driver.
type Options struct {
	DriverName string // memifnet.io
	NodeName   string // the ResourceSlice pool of the node's devices
	StateDir   string // <state>: the checkpoint and link directories go to <state>/dra
	SlotsDir   string // <state>/sockets
	Slots      Slots
	Pools      []Pool
	LinkLimits linkdir.Limits
	CDI        cdi.Writer
	Log        *slog.Logger
}

// Driver prepares and unprepares claims. It is safe for concurrent use.
type Driver struct {
	opts  Options
	links linkdir.Dirs
	ckpt  checkpoint
	slots map[string]resource.Unit // the driver's socket slots by name
	units map[string]*Pool         // the pool of each hugepage unit, by name

	mu     sync.Mutex
	claims map[string]Claim // by UID
}

// New loads the checkpoint of claims prepared before a restart.
func New(opts Options) (*Driver, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	d := &Driver{
		opts:  opts,
		links: linkdir.Dirs{Root: filepath.Join(opts.StateDir, names.DRASubdir, names.LinksSubdir), Limits: opts.LinkLimits},
		ckpt:  checkpoint{path: filepath.Join(opts.StateDir, names.DRASubdir, "claims.json")},
		slots: map[string]resource.Unit{}, units: map[string]*Pool{},
	}
	if opts.Slots != nil {
		for _, u := range opts.Slots.Units() {
			d.slots[u.ID] = u
		}
	}
	for i := range opts.Pools {
		p := &opts.Pools[i]
		for _, u := range p.Units.Units() {
			d.units[u.ID] = p
		}
	}
	claims, err := d.ckpt.load()
	if err != nil {
		return nil, err
	}
	d.claims = claims
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
func (d *Driver) rebaseLinks() error {
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
func (d *Driver) Prepared() []Claim {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Claim, 0, len(d.claims))
	for _, c := range d.claims {
		out = append(out, c)
	}
	sortClaims(out)
	return out
}

func sortClaims(cs []Claim) { sort.Slice(cs, func(a, b int) bool { return cs[a].UID < cs[b].UID }) }

// Result is a prepared claim's devices and their CDI device IDs.
type Result struct {
	Claim Claim
	CDI   map[string][]string // device name -> CDI device IDs
}

// Prepare prepares the claim's devices on this node. A claim already prepared gets the same
// result again (the kubelet repeats Prepare after its own restart); a half-prepared one is
// undone and prepared anew. Bad parameters fail before any side effect, naming the field.
func (d *Driver) Prepare(claim *resourceapi.ResourceClaim) (Result, error) {
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
	if err := d.wire(&plan, ports); err != nil {
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

// plan checks the claim's allocation and parameters and returns what Prepare will do.
func (d *Driver) plan(claim *resourceapi.ResourceClaim) (Claim, map[string]ports.Port, error) {
	plan := Claim{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	var requests []string
	for _, r := range claim.Spec.Devices.Requests {
		requests = append(requests, r.Name)
	}
	var sockets []int
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.opts.DriverName || r.Pool != d.opts.NodeName {
			continue
		}
		dev := Device{Request: baseRequest(r.Request), Pool: r.Pool, Name: r.Device}
		switch {
		case d.hasSlot(r.Device):
			dev.Kind = KindSocket
			sockets = append(sockets, len(plan.Devices))
		case d.units[r.Device] != nil:
			dev.Kind = KindHugepage
		default:
			return plan, nil, fmt.Errorf("allocated device %q (request %s) is not a device of this node's driver", r.Device, r.Request)
		}
		for _, other := range d.claims {
			for _, od := range other.Devices {
				if od.Name == r.Device && other.UID != plan.UID {
					return plan, nil, fmt.Errorf("device %s is held by claim %s/%s (%s); refusing to hand it out twice", r.Device, other.Namespace, other.Name, other.UID)
				}
			}
		}
		plan.Devices = append(plan.Devices, dev)
	}
	cfgs, err := configs(d.opts.DriverName, claim.Status.Allocation, requests)
	if err != nil {
		return plan, nil, err
	}
	link := ""
	switch len(sockets) {
	case 0, 1:
	case 2:
		link = claim.Name
		for _, i := range sockets {
			if l := cfgs[plan.Devices[i].Request].Link; l != "" {
				link = l
			}
		}
		if a, b := plan.Devices[sockets[0]].Request, plan.Devices[sockets[1]].Request; a == b {
			return plan, nil, fmt.Errorf("request %s got both socket devices of the link; a link claim has one request per end", a)
		}
		plan.LinkDir = plan.UID
	default:
		return plan, nil, fmt.Errorf("%d socket devices on one claim: a claim is one link (two socket devices, one per request) or one host port", len(sockets))
	}
	out := map[string]ports.Port{}
	var errs []error
	for _, i := range sockets {
		dev := plan.Devices[i]
		pc := cfgs[dev.Request]
		if pc.Link != "" && link == "" {
			errs = append(errs, fmt.Errorf("request %s: field \"link\": set, but the claim has one socket device (a host port); a link claim has two requests", dev.Request))
			continue
		}
		p, err := port(dev.Request, pc, link)
		if err != nil {
			errs = append(errs, fmt.Errorf("request %s: %w", dev.Request, err))
			continue
		}
		out[dev.Name] = p
	}
	if err := errors.Join(errs...); err != nil {
		return plan, nil, err
	}
	if link != "" {
		if err := roles(plan, sockets, requests, out); err != nil {
			return plan, nil, err
		}
		a, b := out[plan.Devices[sockets[0]].Name], out[plan.Devices[sockets[1]].Name]
		if a.Name == b.Name {
			// Both ends in one pod would be ambiguous; in two pods the names may well match,
			// but then port.json is all the app has to tell them apart by: keep them distinct.
			return plan, nil, fmt.Errorf("requests %s and %s: field \"name\": both ports are named %q", plan.Devices[sockets[0]].Request, plan.Devices[sockets[1]].Request, a.Name)
		}
		if a.Mode != b.Mode || a.ID != b.ID {
			return plan, nil, fmt.Errorf("requests %s and %s disagree on \"mode\" (%s, %s) or \"id\" (%d, %d); the two ends of a link must match",
				plan.Devices[sockets[0]].Request, plan.Devices[sockets[1]].Request, a.Mode, b.Mode, a.ID, b.ID)
		}
	}
	for _, i := range sockets {
		p := out[plan.Devices[i].Name]
		if p.Role == "" { // a host port: the host data plane listens on the slot's socket
			p.Role = "client"
			out[plan.Devices[i].Name] = p
		}
		st := &PortStatus{Name: p.Name, Role: p.Role, Link: p.Link}
		st.Socket = names.ContainerDir + "/" + plan.Devices[i].Name + "/" + names.SocketFile
		if link != "" {
			st.Socket = names.ContainerDir + "/" + plan.Devices[i].Name + "/" + names.LinkSubdir + "/" + names.SocketFile
		} else {
			st.HostSocket = d.opts.Slots.Dir(plan.Devices[i].Name) + "/" + names.SocketFile
		}
		plan.Devices[i].Port = st
	}
	return plan, out, nil
}

// roles fills in the roles of a link's two ends: set ones must differ; an unset one is the
// opposite of the other; with neither set, the request listed first in the claim serves.
func roles(plan Claim, sockets []int, requests []string, out map[string]ports.Port) error {
	a, b := plan.Devices[sockets[0]], plan.Devices[sockets[1]]
	pa, pb := out[a.Name], out[b.Name]
	switch {
	case pa.Role != "" && pa.Role == pb.Role:
		return fmt.Errorf("requests %s and %s: field \"role\": both are %s; one end of a link serves, the other is the client", a.Request, b.Request, pa.Role)
	case pa.Role != "":
		pb.Role = other(pa.Role)
	case pb.Role != "":
		pa.Role = other(pb.Role)
	case slices.Index(requests, a.Request) <= slices.Index(requests, b.Request):
		pa.Role, pb.Role = "server", "client"
	default:
		pa.Role, pb.Role = "client", "server"
	}
	out[a.Name], out[b.Name] = pa, pb
	return nil
}

func other(role string) string {
	if role == "server" {
		return "client"
	}
	return "server"
}

func (d *Driver) hasSlot(name string) bool { _, ok := d.slots[name]; return ok }

// wire performs the plan: scrub every device (each hand-out is a fresh tmpfs or file), make the
// link's directory and mount it in both slots, write port.json, write the CDI spec. It records
// the link's tmpfs in plan (and the checkpoint) before mounting it anywhere.
func (d *Driver) wire(plan *Claim, pp map[string]ports.Port) error {
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
		secret = randomSecret()
	}
	for _, dev := range plan.Devices {
		if dev.Kind != KindSocket {
			continue
		}
		if err := d.wireSlot(*plan, dev, pp[dev.Name], secret); err != nil {
			return fmt.Errorf("slot %s (request %s): %w", dev.Name, dev.Request, err)
		}
	}
	return d.writeCDI(*plan)
}

func (d *Driver) wireSlot(plan Claim, dev Device, p ports.Port, secret string) error {
	slot, err := slotwire.OpenSlot(d.opts.SlotsDir, dev.Name)
	if err != nil {
		return err
	}
	defer slot.Close()
	spec := p.Spec(ports.ClaimOwner(plan.Namespace, plan.Name))
	spec.Socket, spec.Secret = dev.Port.Socket, secret
	if plan.LinkDir != "" {
		if err := slotwire.BindLink(slot, d.links, plan.Namespace, plan.LinkDir, plan.LinkMount); err != nil {
			return err
		}
	}
	return slotwire.WritePortSpec(slot, spec)
}

// cdiName is the per-claim CDI spec's file name (without .json).
func cdiName(uid string) string { return "memifnet.io-claim_" + uid }

func (d *Driver) writeCDI(plan Claim) error {
	spec := cdi.Spec{Kind: CDIKind}
	for _, dev := range plan.Devices {
		var e cdi.Edits
		switch dev.Kind {
		case KindSocket:
			// rbind: the link directory is a mount on <slot>/link; a plain bind would show the
			// container the empty directory beneath it.
			e.Mounts = []cdi.Mount{{HostPath: d.opts.Slots.Dir(dev.Name), ContainerPath: names.ContainerDir + "/" + dev.Name, Options: []string{"rbind", "rw"}}}
			e.Env = []string{names.EnvSockets + "=" + dev.Name}
		case KindHugepage:
			cpath := names.ContainerPoolsDir + "/" + dev.Name
			e.Mounts = []cdi.Mount{{HostPath: d.units[dev.Name].Units.Path(dev.Name), ContainerPath: cpath, Options: []string{"bind", "rw"}}}
			e.Env = []string{names.EnvPools + "=" + cpath}
		}
		spec.Devices = append(spec.Devices, cdi.Device{Name: plan.UID + "-" + dev.Name, Edits: e})
	}
	return d.opts.CDI.WriteNamed(cdiName(plan.UID), spec)
}

func (d *Driver) result(c Claim) Result {
	r := Result{Claim: c, CDI: map[string][]string{}}
	for _, dev := range c.Devices {
		r.CDI[dev.Name] = []string{cdi.QualifiedName(CDIKind, c.UID+"-"+dev.Name)}
	}
	return r
}

func (d *Driver) scrub(dev Device) error {
	var err error
	switch dev.Kind {
	case KindSocket:
		err = d.opts.Slots.Scrub(dev.Name)
	case KindHugepage:
		err = d.units[dev.Name].Units.Scrub(dev.Name)
	}
	if err != nil {
		return fmt.Errorf("scrub %s: %w", dev.Name, err)
	}
	return nil
}

// Unprepare undoes Prepare: the CDI spec goes, every device is scrubbed (a slot gets a fresh
// tmpfs, so the link mount and anything the pods left go with the old one), and the link's
// directory is unmounted. A claim the driver does not know is already unprepared.
func (d *Driver) Unprepare(uid string) error {
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
func (d *Driver) undo(c Claim) error {
	var errs []error
	errs = append(errs, d.opts.CDI.Remove(cdiName(c.UID)))
	for _, dev := range c.Devices {
		errs = append(errs, d.scrub(dev))
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

// randomSecret is a link's memif secret: 22 hex characters (the protocol holds 23).
func randomSecret() string {
	b := make([]byte, 11)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
