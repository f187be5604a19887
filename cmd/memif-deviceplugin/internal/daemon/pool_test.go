package daemon

import (
	"bytes"
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/config"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
)

func withPool(t *testing.T, o Options, unitSize int64, units int) Options {
	o.Config.Pools = []config.Pool{{Name: "hugepool", PageSize: config.Quantity{Bytes: 2 << 20, Text: "2Mi"},
		UnitSize: config.Quantity{Bytes: unitSize}, UnitsPerNUMANode: units}}
	t.Cleanup(func() { _ = unix.Unmount(o.StateDir+"/pools/hugepool", unix.MNT_DETACH) })
	return o
}

// registrations collects the first n registrations by resource name.
func registrations(t *testing.T, e *env, n int) map[string]*pluginapi.RegisterRequest {
	out := map[string]*pluginapi.RegisterRequest{}
	for range n {
		r := e.kubelet.WaitRegistration(t, 5*time.Second)
		out[r.ResourceName] = r
	}
	return out
}

func TestPoolResourceOverGRPC(t *testing.T) {
	testutil.NeedHugepages(t, 8)
	e := newEnv(t, 1)
	o := withPool(t, e.options(t, 2), 4<<20, 2)
	o.ReclaimGrace = time.Nanosecond
	d, _ := start(t, o)
	regs := registrations(t, e, 2)
	reg := regs["memifnet.io/hugepool"]
	if reg == nil || reg.Endpoint != "memifnet.io-hugepool.sock" {
		t.Fatalf("registrations %v", regs)
	}
	c := e.kubelet.Dial(t, reg.Endpoint)
	devs := listDevices(t, c, 2)
	if d := devs["hugepool-n0-001"]; d == nil || d.Health != pluginapi.Healthy || d.Topology.Nodes[0].ID != 0 {
		t.Fatalf("devices %v", devs)
	}
	res := d.Resources()[1]
	eventually(t, 2*time.Second, "initial reclaim", func() bool { return res.Stats().Dirty == 0 })

	// Held from the start: with a grace of 1ns the reclaim would otherwise take the unit back
	// between Allocate and the Hold (the kubelet's real grace is 30s).
	e.kubelet.Hold("memifnet.io/hugepool", "hugepool-n0-001")
	resp := allocate(t, c, []string{"hugepool-n0-001"})
	cr := resp.ContainerResponses[0]
	if cr.Envs[names.EnvPools] != "/run/memifnet/pools/hugepool-n0-001" || len(cr.Mounts) != 1 ||
		cr.Mounts[0].ContainerPath != "/run/memifnet/pools/hugepool-n0-001" {
		t.Fatalf("response %v", cr)
	}
	a := mapFile(t, cr.Mounts[0].HostPath, 4<<20)
	copy(a[1<<20:], "tenant A secret")
	e.kubelet.WaitLists(t, 3, 2*time.Second)
	if string(a[1<<20:1<<20+6]) != "tenant" {
		t.Fatal("unit in use was scrubbed")
	}
	e.kubelet.Hold("memifnet.io/hugepool")
	eventually(t, 2*time.Second, "background scrub", func() bool { return res.Stats().Dirty == 0 })
	// Held again before the second Allocate, for the same reason: unheld, the reclaim may scrub
	// (replace) the unit between the Allocate and the mapping below (seen under -race).
	e.kubelet.Hold("memifnet.io/hugepool", "hugepool-n0-001")
	resp = allocate(t, c, []string{"hugepool-n0-001"})
	b := mapFile(t, resp.ContainerResponses[0].Mounts[0].HostPath, 4<<20)
	if !bytes.Equal(b, make([]byte, 4<<20)) {
		t.Fatal("tenant B sees tenant A's data")
	}
}

func listDevices(t *testing.T, c pluginapi.DevicePluginClient, n int) map[string]*pluginapi.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	must(t, err)
	r, err := s.Recv()
	must(t, err)
	out := map[string]*pluginapi.Device{}
	for _, d := range r.Devices {
		out[d.ID] = d
	}
	if len(out) != n {
		t.Fatalf("%d devices, want %d: %v", len(out), n, out)
	}
	return out
}

func mapFile(t *testing.T, path string, size int) []byte {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	must(t, err)
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

// TestAllocateLatency measures Allocate over gRPC with 1024 slots and
// already-scrubbed 64 MiB pool units, the figure in docs/deviceplugin.md.
// The 5 ms bound is checked only without the race detector, which slows
// everything several times.
func TestAllocateLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	testutil.NeedHugepages(t, 4*32)
	e := newEnv(t, 1)
	o := withPool(t, e.options(t, 1024), 64<<20, 4)
	d, _ := start(t, o)
	regs := registrations(t, e, 2)
	slotsC := e.kubelet.Dial(t, regs[socketRes].Endpoint)
	poolC := e.kubelet.Dial(t, regs["memifnet.io/hugepool"].Endpoint)
	slotsR, poolR := d.Resources()[0], d.Resources()[1]
	eventually(t, 10*time.Second, "initial reclaim", func() bool {
		return slotsR.Stats().Dirty == 0 && poolR.Stats().Dirty == 0
	})
	ctx := context.Background()
	var lat []time.Duration
	const rounds = 1000
	for i := range rounds {
		if i%512 == 0 && i > 0 {
			slotsR.Reclaim(ctx, nil, time.Now().Add(2*time.Hour), time.Hour)
		}
		j := (2 * i) % 1024
		ids := []string{slotIDs[j], slotIDs[j+1]}
		t0 := time.Now()
		allocate(t, slotsC, ids)
		lat = append(lat, time.Since(t0))

		unit := []string{"hugepool-n0-000", "hugepool-n0-001", "hugepool-n0-002", "hugepool-n0-003"}[i%4]
		if i%4 == 0 {
			poolR.Reclaim(ctx, nil, time.Now().Add(2*time.Hour), time.Hour)
		}
		t0 = time.Now()
		allocate(t, poolC, []string{unit})
		lat = append(lat, time.Since(t0))
	}
	if got := slotsR.Stats().SyncScrubs + poolR.Stats().SyncScrubs; got != 0 {
		t.Fatalf("%d scrubs inside Allocate: the units were not clean", got)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("Allocate over gRPC, %d calls (1024 slots, 2 per call; 64Mi pool units): p50 %v p99 %v max %v", len(lat), p50, p99, lat[len(lat)-1])
	// p99 depends on the machine's load (other jobs on 2 cores push it
	// past 10 ms), so the strict bound is opt-in; p50 is always checked.
	if !raceEnabled && p50 > 5*time.Millisecond {
		t.Fatalf("p50 %v over 5ms", p50)
	}
	if os.Getenv("MEMIFNET_STRICT_LATENCY") == "1" && p99 > 5*time.Millisecond {
		t.Fatalf("p99 %v over 5ms", p99)
	}
}

var slotIDs = func() []string {
	var ids []string
	for i := range 1024 {
		ids = append(ids, "slot-"+pad(i))
	}
	return ids
}()

func pad(i int) string {
	s := "000" + itoa(i)
	return s[len(s)-4:]
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
