package dra

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/events"
	"github.com/memifnet/memifnet/internal/names"
)

// TestUnprepareWithUnscrubbableSlot: a link claim's slot cannot be scrubbed at Unprepare, for
// real (its device-info path is a directory the scrub cannot remove). Unprepare completes all the
// same (the claim and its other slot are free); the slot leaves the ResourceSlices, an Event names
// it and the error, and a claim allocated it before the slices changed is refused at Prepare with
// the reason, the previous tenant's file never handed out, while other claims prepare. The
// periodic recheck scrubs it again: while the cause is there it stays out (no second Event), once
// the cause is gone it is back in the slices, empty, with an Event, and prepares.
func TestUnprepareWithUnscrubbableSlot(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	client := fake.NewClientset()
	pub := &publisher{}
	p := &Driver{state: d, client: client, log: d.opts.Log, publish: pub.publish, events: recorder(t, client, d.opts.Log)}
	ctx := context.Background()
	if err := p.publishUnits(ctx); err != nil {
		t.Fatal(err)
	}
	const bad = "dra-slot-001"
	if _, err := d.Prepare(claim("uid-a", "a", linkAllocs)); err != nil {
		t.Fatal(err)
	}
	tenant := filepath.Join(e.slots.Dir(bad), "tenant")
	if err := os.WriteFile(tenant, []byte("tenant a secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	info := e.devinfo.Path(names.SocketResource, bad)
	if err := os.MkdirAll(filepath.Join(info, "x"), 0o755); err != nil {
		t.Fatal(err)
	}

	un, err := p.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: "uid-a"}})
	if err != nil || un["uid-a"] != nil {
		t.Fatalf("unprepare with an unscrubbable slot: %v %v", err, un)
	}
	if c := d.Prepared(); len(c) != 0 {
		t.Fatalf("claims still prepared after Unprepare: %+v", c)
	}
	if f := d.ScrubFailures()[bad]; !errors.Is(f, device.ErrScrubFailed) || !strings.Contains(f.Error(), "remove device-info") {
		t.Errorf("scrub failure of %s: %v, want device.ErrScrubFailed with the reason", bad, f)
	}
	if pub.has(bad) || !pub.has("dra-slot-000") || !pub.has("dra-slot-002") {
		t.Errorf("published slices: %s present %v, others %v %v; want it alone left out", bad, pub.has(bad), pub.has("dra-slot-000"), pub.has("dra-slot-002"))
	}
	failedEvents := func() {
		t.Helper()
		evs := awaitEvents(t, client, events.ReasonScrubFailed)
		if len(evs) != 1 || !strings.Contains(evs[0].Message, bad) || !strings.Contains(evs[0].Message, "remove device-info") ||
			evs[0].InvolvedObject.Kind != "Node" || evs[0].InvolvedObject.Name != testNode {
			t.Errorf("scrub failed events: %+v, want one naming %s and the error", evs, bad)
		}
	}
	failedEvents()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(d, device.Collector{Trackers: func() []*device.Tracker { return []*device.Tracker{d.Tracker()} }})
	compare(t, reg, `
# HELP memifnet_dra_devices The DRA driver's devices by type (socket, hugepage), hugepage pool and state (used, free, withheld, scrub_failed).
# TYPE memifnet_dra_devices gauge
memifnet_dra_devices{pool="",state="free",type="socket"} 3
memifnet_dra_devices{pool="",state="scrub_failed",type="socket"} 1
memifnet_dra_devices{pool="",state="used",type="socket"} 0
memifnet_dra_devices{pool="",state="withheld",type="socket"} 0
memifnet_dra_devices{pool="drapool",state="free",type="hugepage"} 2
memifnet_dra_devices{pool="drapool",state="scrub_failed",type="hugepage"} 0
memifnet_dra_devices{pool="drapool",state="used",type="hugepage"} 0
memifnet_dra_devices{pool="drapool",state="withheld",type="hugepage"} 0
`, "memifnet_dra_devices")

	late := claim("uid-late", "late", []alloc{{"port", bad}}) // allocated before the slices changed
	if _, err := d.Prepare(late); err == nil || !strings.Contains(err.Error(), "remove device-info") {
		t.Fatalf("Prepare of a claim with the unscrubbable slot: %v, want the scrub's failure", err)
	}
	if b, err := os.ReadFile(tenant); err != nil || string(b) != "tenant a secret" {
		t.Errorf("the failed scrub did not get as far as the tenant's file: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, cdiName("uid-late")+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a CDI spec for the refused claim: %v", err)
	}
	if _, err := d.Prepare(claim("uid-b", "b", []alloc{{"east", "dra-slot-000"}, {"west", "dra-slot-002"}})); err != nil {
		t.Fatalf("another claim: %v", err)
	}

	p.SyncUnits(ctx) // the retry fails the same way
	if pub.has(bad) {
		t.Error("the slot is back in the slices while its scrub still fails")
	}
	failedEvents()
	compare(t, reg, `
# HELP memifnet_dra_scrub_errors_total Scrubs of the DRA driver's devices that failed, by type and hugepage pool: a device out of service counts once, not at every retry (a withheld unit is not counted).
# TYPE memifnet_dra_scrub_errors_total counter
memifnet_dra_scrub_errors_total{pool="",type="socket"} 1
`, "memifnet_dra_scrub_errors_total")
	compare(t, reg, `
# HELP memifnet_device_scrub_errors_total Failed scrubs, by backend and resource: a device out of service counts once, not at every retry; a withheld unit is not an error.
# TYPE memifnet_device_scrub_errors_total counter
memifnet_device_scrub_errors_total{backend="dra",resource="memifnet.io/drapool"} 0
memifnet_device_scrub_errors_total{backend="dra",resource="memifnet.io/socket"} 1
# HELP memifnet_devices_out_of_service Devices out of service, by backend (deviceplugin, dra), resource and state (withheld: a previous tenant holds its old file; scrub_failed: until a retried scrub works).
# TYPE memifnet_devices_out_of_service gauge
memifnet_devices_out_of_service{backend="dra",resource="memifnet.io/drapool",state="scrub_failed"} 0
memifnet_devices_out_of_service{backend="dra",resource="memifnet.io/drapool",state="withheld"} 0
memifnet_devices_out_of_service{backend="dra",resource="memifnet.io/socket",state="scrub_failed"} 1
memifnet_devices_out_of_service{backend="dra",resource="memifnet.io/socket",state="withheld"} 0
`, "memifnet_device_scrub_errors_total", "memifnet_devices_out_of_service")

	if err := os.RemoveAll(info); err != nil {
		t.Fatal(err)
	}
	p.SyncUnits(ctx)
	if !pub.has(bad) || len(d.ScrubFailures()) != 0 {
		t.Fatalf("after the cause is gone: in the slices %v, failures %v", pub.has(bad), d.ScrubFailures())
	}
	if evs := awaitEvents(t, client, events.ReasonRecovered); len(evs) != 1 || !strings.Contains(evs[0].Message, bad) {
		t.Errorf("recovered events: %+v", evs)
	}
	if ents, err := os.ReadDir(e.slots.Dir(bad)); err != nil || len(ents) != 0 {
		t.Errorf("the slot back in service holds %v (%v)", ents, err)
	}
	if _, err := d.Prepare(late); err != nil {
		t.Fatalf("Prepare after the slot came back: %v", err)
	}
}

// TestUnprepareWithUnscrubbableUnit: the same for a hugepage unit of a real pool, whose name a
// directory that is not empty has taken by Unprepare: the unit leaves the slices (and is not
// withheld), the rest of the pool stays; once the directory is gone the recheck makes the unit
// again and it prepares.
func TestUnprepareWithUnscrubbableUnit(t *testing.T) {
	e := newEnv(t)
	pool := withRealPool(t, e, 2)
	d := e.deviceState(t)
	client := fake.NewClientset()
	pub := &publisher{}
	p := &Driver{state: d, client: client, log: d.opts.Log, publish: pub.publish, events: recorder(t, client, d.opts.Log)}
	ctx := context.Background()
	if err := p.publishUnits(ctx); err != nil {
		t.Fatal(err)
	}
	const bad = "drapool-n0-000"
	a := claim("uid-a", "a", []alloc{{"port", "dra-slot-000"}, {"mem", bad}})
	if _, err := d.Prepare(a); err != nil {
		t.Fatal(err)
	}
	path := pool.Path(bad)
	for _, err := range []error{os.Remove(path), os.Mkdir(path, 0o755), os.Mkdir(filepath.Join(path, "x"), 0o755)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if un, err := p.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: "uid-a"}}); err != nil || un["uid-a"] != nil {
		t.Fatalf("unprepare with an unscrubbable unit: %v %v", err, un)
	}
	if pub.has(bad) || !pub.has("drapool-n0-001") || !pub.has("dra-slot-000") {
		t.Errorf("published slices: %s present %v, others %v %v; want it alone left out", bad, pub.has(bad), pub.has("drapool-n0-001"), pub.has("dra-slot-000"))
	}
	if w := d.Withheld(); len(w) != 0 {
		t.Errorf("withheld %v, want none (the scrub failed, no tenant holds the unit)", w)
	}
	if evs := awaitEvents(t, client, events.ReasonScrubFailed); len(evs) != 1 || !strings.Contains(evs[0].Message, bad) {
		t.Errorf("scrub failed events: %+v", evs)
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	p.SyncUnits(ctx)
	if !pub.has(bad) || len(awaitEvents(t, client, events.ReasonRecovered)) != 1 {
		t.Fatalf("after the cause is gone: in the slices %v, events %+v", pub.has(bad), eventsOf(t, client, events.ReasonRecovered))
	}
	if _, err := d.Prepare(claim("uid-b", "b", []alloc{{"mem", bad}})); err != nil {
		t.Fatalf("Prepare after the unit came back: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Size() != 4<<20 {
		t.Errorf("the unit after it came back: %v %v", fi, err)
	}
}
