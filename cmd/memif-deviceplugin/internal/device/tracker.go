package device

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
)

// State is why a device is out of service.
type State string

// The states of a device out of service (the state label of the out-of-service metrics).
const (
	// Withheld: a previous tenant still holds what the device was made of (ErrWithheld); the
	// provider makes it again once that is let go.
	Withheld State = "withheld"
	// ScrubFailed: its scrub failed (ErrScrubFailed); the previous tenant's traces may still be
	// there, so it stays out until a retried scrub works.
	ScrubFailed State = "scrub_failed"
)

// States are the states out of service, in the order metrics list them.
var States = []State{Withheld, ScrubFailed}

// The backends, the backend label of the out-of-service metrics.
const (
	BackendDevicePlugin = "deviceplugin"
	BackendDRA          = "dra"
)

// maxQueued bounds the transitions kept for a consumer that stopped draining (the agent is
// stopping): the oldest go first. Far more than a node's devices can make between two drains.
const maxQueued = 4096

// Transition is one device going out of service (Out) or coming back. A device that goes from
// one state out of service straight to the other makes two: it leaves the first (Then names the
// second) and enters the second.
type Transition struct {
	Backend  string
	Resource string
	Device   string
	State    State // the state entered (Out) or left
	Out      bool
	Then     State // when leaving: the state it entered instead, or "" when back in service
	Err      error // why it is out (Out)
}

type outage struct {
	state State
	err   error
}

// Tracker is one backend's record of its devices out of service: which, why, since which
// transition. Both backends feed it every scrub's result (Scrubbed); it counts each device's
// failure once per outage, logs each transition once, and keeps the transitions for whoever
// records Events (Drain), so that an Event marks a transition, not a poll that saw one. It is
// safe for concurrent use.
type Tracker struct {
	backend string
	log     *slog.Logger

	mu        sync.Mutex
	resources map[string]string // device -> resource (the metrics' resource label)
	out       map[string]outage
	errors    map[string]uint64 // failed scrubs by resource
	version   uint64            // bumped at every transition
	draining  bool              // a consumer drains: transitions are queued
	queue     []Transition
}

// NewTracker returns an empty tracker of backend's devices.
func NewTracker(backend string, log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.Default()
	}
	return &Tracker{backend: backend, log: log, resources: map[string]string{}, out: map[string]outage{}, errors: map[string]uint64{}}
}

// Backend is the tracker's backend label.
func (t *Tracker) Backend() string { return t.backend }

// Add registers units as devices of resource (the device plugin's extended resource name, or
// the DRA driver's memifnet.io/socket and memifnet.io/<pool>).
func (t *Tracker) Add(resource string, units []Unit) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, u := range units {
		t.resources[u.ID] = resource
	}
}

// Scrubbed records the result of a scrub of device id: nil puts it back in service, an error
// wrapping ErrWithheld takes it out as withheld, one wrapping ErrScrubFailed as scrub failed
// (counted once per outage, not at each retry). Any other error is counted at each scrub and
// leaves the device's state as it was: what it means is the caller's to decide (Fail).
func (t *Tracker) Scrubbed(id string, err error) {
	switch {
	case err == nil:
		t.set(id, "", nil)
	case errors.Is(err, ErrWithheld):
		t.set(id, Withheld, err)
	case errors.Is(err, ErrScrubFailed):
		t.set(id, ScrubFailed, err)
	default:
		t.mu.Lock()
		t.errors[t.resources[id]]++
		t.mu.Unlock()
	}
}

// Fail takes device id out of service for a failed scrub, whatever err is: the device plugin
// keeps any device out whose scrub (or the check after it) did not leave it clean.
func (t *Tracker) Fail(id string, err error) { t.set(id, ScrubFailed, err) }

// Withhold records a device its provider withholds without a scrub (a pool unit it could not
// make at start).
func (t *Tracker) Withhold(id string, err error) { t.set(id, Withheld, err) }

// set moves id to state st ("" is in service) with err, and records the transition if any.
func (t *Tracker) set(id string, st State, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, was := t.out[id]
	if !was && st == "" {
		return
	}
	if was && cur.state == st {
		t.out[id] = outage{st, err} // the newest reason, no transition
		return
	}
	res := t.resources[id]
	if was {
		t.transition(Transition{Backend: t.backend, Resource: res, Device: id, State: cur.state, Then: st})
	}
	if st == "" {
		delete(t.out, id)
		return
	}
	if st == ScrubFailed {
		t.errors[res]++
	}
	t.out[id] = outage{st, err}
	t.transition(Transition{Backend: t.backend, Resource: res, Device: id, State: st, Out: true, Err: err})
}

// transition logs tr and queues it for the consumer. The caller holds t.mu.
func (t *Tracker) transition(tr Transition) {
	t.version++
	switch {
	case tr.Out:
		t.log.Warn("device out of service", "backend", tr.Backend, "device", tr.Device, "state", tr.State, "err", tr.Err)
	case tr.Then == "":
		t.log.Info("device back in service", "backend", tr.Backend, "device", tr.Device, "was", tr.State)
	}
	if !t.draining {
		return
	}
	if len(t.queue) == maxQueued {
		t.queue = slices.Delete(t.queue, 0, 1)
	}
	t.queue = append(t.queue, tr)
}

// Drain returns the transitions since the last Drain, oldest first. The first Drain returns
// every device out of service at that time as going out: its consumer starts from nothing.
func (t *Tracker) Drain() []Transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.draining {
		t.draining = true
		for _, id := range slices.Sorted(maps.Keys(t.out)) {
			o := t.out[id]
			t.queue = append(t.queue, Transition{Backend: t.backend, Resource: t.resources[id], Device: id, State: o.state, Out: true, Err: o.err})
		}
	}
	q := t.queue
	t.queue = nil
	return q
}

// Version changes at every transition: a consumer that publishes the devices in service
// (the DRA driver's slices) compares it with what it published.
func (t *Tracker) Version() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.version
}

// State is why device id is out of service, or "" and nil when it is in service.
func (t *Tracker) State(id string) (State, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.out[id]
	return o.state, o.err
}

// Out are the devices out of service in state st, with the reason.
func (t *Tracker) Out(st State) map[string]error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := map[string]error{}
	for id, o := range t.out {
		if o.state == st {
			m[id] = o.err
		}
	}
	return m
}

// Counts are the devices out of service of one resource by state, and its failed scrubs.
type Counts struct {
	Resource string
	Out      map[State]int
	Errors   uint64
}

// Counts are the tracker's numbers per resource, in resource order, every resource and
// state present (at 0 when none).
func (t *Tracker) Counts() []Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	by := map[string]*Counts{}
	get := func(res string) *Counts {
		if c := by[res]; c != nil {
			return c
		}
		c := &Counts{Resource: res, Out: map[State]int{Withheld: 0, ScrubFailed: 0}}
		by[res] = c
		return c
	}
	for _, res := range t.resources {
		get(res)
	}
	for id, o := range t.out {
		get(t.resources[id]).Out[o.state]++
	}
	for res, n := range t.errors {
		get(res).Errors = n
	}
	out := make([]Counts, 0, len(by))
	for _, res := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[res])
	}
	return out
}
