package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"golang.org/x/sys/unix"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/config"
	"github.com/memifnet/memifnet/internal/kubeletfake"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
)

const socketRes = names.SocketResource

type env struct {
	root, kubeletDir, stateDir, devinfoDir, sysfs string
	kubelet                                       *kubeletfake.Kubelet // Registration and PodResources
}

// newEnv makes a temp host: kubelet dir with a Registration and a
// PodResources stand-in, a state dir and a fake sysfs with nodes NUMA nodes.
func newEnv(t *testing.T, nodes int) *env {
	t.Helper()
	testutil.RequireRoot(t, "the device plugin mounts a tmpfs per slot")
	root, err := os.MkdirTemp("", "mdp") // short: socket paths must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		testutil.UnmountUnder(t, root)
		os.RemoveAll(root)
	})
	e := &env{root: root, kubeletDir: filepath.Join(root, "kubelet"), stateDir: filepath.Join(root, "state"),
		devinfoDir: filepath.Join(root, "devinfo"), sysfs: filepath.Join(root, "sys")}
	for n := range nodes {
		if err := os.MkdirAll(filepath.Join(e.sysfs, "devices/system/node", "node"+string(rune('0'+n))), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.kubelet = kubeletfake.New()
	e.kubelet.ServeRegistration(t, e.kubeletDir)
	e.kubelet.ServePodResources(t, e.kubeletDir)
	return e
}

func testLog(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (e *env) options(t *testing.T, slots int) Options {
	return Options{
		Config:     config.Config{SocketSlots: slots, SlotLimits: config.Default().SlotLimits},
		KubeletDir: e.kubeletDir, StateDir: e.stateDir, SysfsRoot: e.sysfs, DevinfoDir: e.devinfoDir,
		HealthInterval: 50 * time.Millisecond, ReclaimInterval: 20 * time.Millisecond,
		// Devices allocated by a test are reclaimed only by tests that say so
		// (grace 1ns): the PodResources stand-in lists only what Hold says.
		ReclaimGrace: time.Hour, Log: testLog(t),
	}
}

// start runs a daemon; the returned stop ends it and waits.
func start(t *testing.T, o Options) (*Daemon, func()) {
	t.Helper()
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("daemon did not stop within 5s")
		}
	}
	t.Cleanup(stop)
	return d, stop
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, d, what, cond)
}

func allocate(t *testing.T, c pluginapi.DevicePluginClient, ctrs ...[]string) *pluginapi.AllocateResponse {
	t.Helper()
	req := &pluginapi.AllocateRequest{}
	for _, ids := range ctrs {
		req.ContainerRequests = append(req.ContainerRequests, &pluginapi.ContainerAllocateRequest{DevicesIds: ids})
	}
	resp, err := c.Allocate(context.Background(), req)
	if err != nil {
		t.Fatalf("allocate %v: %v", ctrs, err)
	}
	return resp
}

func TestRegisterListAllocate(t *testing.T) {
	e := newEnv(t, 1)
	start(t, e.options(t, 8))
	reg := e.kubelet.WaitRegistration(t, 2*time.Second)
	if reg.Version != pluginapi.Version || reg.ResourceName != socketRes || reg.Endpoint != "memifnet.io-socket.sock" ||
		!reg.Options.GetPreferredAllocationAvailable {
		t.Fatalf("registration %+v", reg)
	}
	c := e.kubelet.Dial(t, reg.Endpoint)
	opts, err := c.GetDevicePluginOptions(context.Background(), &pluginapi.Empty{})
	if err != nil || !opts.GetPreferredAllocationAvailable {
		t.Fatalf("options %v %v", opts, err)
	}
	devs := kubeletfake.ListAndWatch(t, c).WaitFor(t, time.Second, "8 healthy slots", func(m map[string]*pluginapi.Device) bool {
		return len(m) == 8
	})
	for _, id := range []string{"slot-000", "slot-007"} {
		d := devs[id]
		if d == nil || d.Health != pluginapi.Healthy || d.Topology.Nodes[0].ID != 0 {
			t.Fatalf("device %s: %v", id, d)
		}
	}

	resp := allocate(t, c, []string{"slot-000", "slot-003"}, []string{"slot-005"})
	if len(resp.ContainerResponses) != 2 {
		t.Fatalf("responses %v", resp)
	}
	c0, c1 := resp.ContainerResponses[0], resp.ContainerResponses[1]
	if got := c0.Envs["MEMIFNET_SOCKETS"]; got != "slot-000,slot-003" {
		t.Fatalf("env %q", got)
	}
	if got := c1.Envs["MEMIFNET_SOCKETS"]; got != "slot-005" {
		t.Fatalf("env %q", got)
	}
	wantMounts := []*pluginapi.Mount{
		{HostPath: filepath.Join(e.stateDir, "sockets/slot-000"), ContainerPath: "/run/memifnet/slot-000"},
		{HostPath: filepath.Join(e.stateDir, "sockets/slot-003"), ContainerPath: "/run/memifnet/slot-003"},
	}
	if len(c0.Mounts) != 2 {
		t.Fatalf("mounts %v", c0.Mounts)
	}
	for i, m := range c0.Mounts {
		if m.HostPath != wantMounts[i].HostPath || m.ContainerPath != wantMounts[i].ContainerPath || m.ReadOnly {
			t.Fatalf("mount %d: %v want %v", i, m, wantMounts[i])
		}
		if fi, err := os.Stat(m.HostPath); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
			t.Fatalf("slot dir %s: %v %v", m.HostPath, fi, err)
		}
	}
	for _, id := range []string{"slot-000", "slot-003", "slot-005"} {
		b, err := os.ReadFile(filepath.Join(e.devinfoDir, "memifnet.io-socket-"+id+"-device.json"))
		if err != nil {
			t.Fatal(err)
		}
		var info devinfo.Info
		if err := json.Unmarshal(b, &info); err != nil {
			t.Fatal(err)
		}
		want := devinfo.Info{Type: "memif", Version: "1.1.0", Memif: &devinfo.Memif{Role: "slave", Path: "/run/memifnet/" + id + "/memif.sock", Mode: "ethernet"}}
		if !reflect.DeepEqual(info, want) {
			t.Fatalf("device-info %s: %+v", id, info)
		}
	}
	if _, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"slot-001", "slot-099"}}}}); err == nil || !strings.Contains(err.Error(), "slot-099") {
		t.Fatalf("unknown device: %v", err)
	}
}

func TestHealthFollowsSlotMount(t *testing.T) {
	e := newEnv(t, 1)
	o := e.options(t, 4)
	d, _ := start(t, o)
	reg := e.kubelet.WaitRegistration(t, 2*time.Second)
	c := e.kubelet.Dial(t, reg.Endpoint)
	w := kubeletfake.ListAndWatch(t, c)
	eventually(t, 2*time.Second, "initial reclaim", func() bool { return d.Resources()[0].Stats().Dirty == 0 })
	healthy := func(id string, want string) func(m map[string]*pluginapi.Device) bool {
		return func(m map[string]*pluginapi.Device) bool { return m[id] != nil && m[id].Health == want }
	}
	w.WaitFor(t, time.Second, "slot-002 healthy", healthy("slot-002", pluginapi.Healthy))
	dir := filepath.Join(e.stateDir, "sockets", "slot-002")

	// A slot handed out and damaged is reported, and left alone (a pod may be using it).
	allocate(t, c, []string{"slot-002"})
	must(t, os.Chmod(dir, 0o700))
	t0 := time.Now()
	w.WaitFor(t, time.Second, "slot-002 unhealthy after chmod", healthy("slot-002", pluginapi.Unhealthy))
	t.Logf("mode: unhealthy after %v", time.Since(t0))
	if _, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"slot-002"}}}}); err == nil {
		t.Fatal("allocate of an unhealthy slot succeeded")
	}
	must(t, os.Chmod(dir, 0o777))
	w.WaitFor(t, time.Second, "slot-002 healthy after chmod back", healthy("slot-002", pluginapi.Healthy))

	// A free slot whose tmpfs is gone or replaced is rebuilt by the plugin.
	free := filepath.Join(e.stateDir, "sockets", "slot-001")
	for _, damage := range []struct {
		name string
		do   func() error
	}{
		{"unmounted", func() error { return unix.Unmount(free, unix.MNT_DETACH) }},
		{"replaced", func() error { return unix.Mount("impostor", free, "tmpfs", 0, "size=64k") }},
	} {
		must(t, damage.do())
		t0 := time.Now()
		eventually(t, 2*time.Second, "slot-001 rebuilt after "+damage.name, func() bool {
			return d.Resources()[0].Stats().Healthy == 4 && slotIsFreshTmpfs(t, free)
		})
		t.Logf("%s: rebuilt after %v", damage.name, time.Since(t0))
	}
	allocate(t, c, []string{"slot-001"})
}

// slotIsFreshTmpfs: the top mount on dir is a tmpfs of the plugin's making, with nothing in it.
func slotIsFreshTmpfs(t *testing.T, dir string) bool {
	if testutil.MountSource(t, dir) != "memifnet-slot" {
		return false
	}
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) == 0
}

// TestScrubBetweenTenants writes as one tenant and reads as the next, once
// with the scrub at Allocate (no PodResources answer) and once in the
// background after PodResources stops listing the slot.
func TestScrubBetweenTenants(t *testing.T) {
	for _, background := range []bool{false, true} {
		name := map[bool]string{false: "at allocate", true: "background"}[background]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1)
			o := e.options(t, 4)
			o.ReclaimGrace = time.Nanosecond
			if !background {
				// Every slot counts as held, so nothing is reclaimed in the
				// background and the scrub happens in Allocate.
				e.kubelet.Hold(socketRes, "slot-000", "slot-001", "slot-002", "slot-003")
			}
			d, _ := start(t, o)
			reg := e.kubelet.WaitRegistration(t, 2*time.Second)
			c := e.kubelet.Dial(t, reg.Endpoint)
			res := d.Resources()[0]
			if !background {
				// The first start counts every slot dirty; once held by a pod none is reclaimed.
				e.kubelet.WaitLists(t, 2, 2*time.Second)
			} else {
				eventually(t, 2*time.Second, "all slots reclaimed at start", func() bool { return res.Stats().Dirty == 0 })
			}

			// Tenant A. PodResources lists the slot from Allocate on: with a grace of 1ns a
			// reclaim pass in between would scrub it under tenant A's writes.
			e.kubelet.Hold(socketRes, "slot-001")
			resp := allocate(t, c, []string{"slot-001"})
			host := resp.ContainerResponses[0].Mounts[0].HostPath
			secret := []byte("tenant A secret")
			must(t, os.WriteFile(filepath.Join(host, "port.json"), secret, 0o600))
			must(t, os.MkdirAll(filepath.Join(host, "deep/er"), 0o755))
			must(t, os.WriteFile(filepath.Join(host, "deep/er/f"), secret, 0o600))
			lis, err := net.Listen("unix", filepath.Join(host, "memif.sock"))
			must(t, err)
			lis.(*net.UnixListener).SetUnlinkOnClose(false)
			lis.Close()
			// A link directory bind-mounted into the slot by the CNI: the
			// scrub must unmount it, not delete the link's files.
			link := filepath.Join(e.root, "links", "ns", "chain-1")
			must(t, os.MkdirAll(link, 0o755))
			must(t, os.WriteFile(filepath.Join(link, "keep"), secret, 0o600))
			must(t, os.Mkdir(filepath.Join(host, "link"), 0o755))
			must(t, unix.Mount(link, filepath.Join(host, "link"), "", unix.MS_BIND, ""))
			// Tenant A keeps a descriptor of its slot (or passes it to another pod) to reach
			// whoever gets the slot next.
			kept, err := unix.Open(host, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			must(t, err)
			defer unix.Close(kept)

			if background {
				// Still held: a reclaim pass must leave it alone.
				e.kubelet.WaitLists(t, 3, 2*time.Second)
				if _, err := os.Stat(filepath.Join(host, "port.json")); err != nil {
					t.Fatalf("slot in use was scrubbed: %v", err)
				}
				e.kubelet.Hold(socketRes)
				eventually(t, 2*time.Second, "background scrub", func() bool { return res.Stats().BackgroundScrub >= 5 })
			}
			syncBefore := res.Stats().SyncScrubs

			// Tenant B.
			resp = allocate(t, c, []string{"slot-001"})
			ents, err := os.ReadDir(resp.ContainerResponses[0].Mounts[0].HostPath)
			must(t, err)
			if len(ents) != 0 {
				t.Fatalf("tenant B sees %v", ents)
			}
			if b, err := os.ReadFile(filepath.Join(link, "keep")); err != nil || string(b) != string(secret) {
				t.Fatalf("link dir damaged by scrub: %q %v", b, err)
			}
			// Tenant B's files are out of reach of tenant A's descriptor, and what A plants
			// through it does not show in B's slot.
			bHost := resp.ContainerResponses[0].Mounts[0].HostPath
			must(t, os.WriteFile(filepath.Join(bHost, "port.json"), []byte("tenant B"), 0o644))
			fd, err := unix.Openat(kept, "port.json", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			must(t, err)
			var buf [64]byte
			n, _ := unix.Read(fd, buf[:])
			unix.Close(fd)
			if string(buf[:n]) != string(secret) {
				t.Fatalf("through its old descriptor tenant A reads %q", buf[:n])
			}
			must(t, unix.Symlinkat("/etc", kept, "planted"))
			must(t, unix.Mkdirat(kept, "link2", 0o755))
			if ents, err := os.ReadDir(bHost); err != nil || len(ents) != 1 || ents[0].Name() != "port.json" {
				t.Fatalf("tenant B's slot holds %v (%v)", ents, err)
			}
			wantSync := syncBefore + 1
			if background {
				wantSync = syncBefore
			}
			if got := res.Stats().SyncScrubs; got != wantSync {
				t.Fatalf("allocate scrubs %d, want %d", got, wantSync)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPreferredAllocationTwoNUMANodes(t *testing.T) {
	e := newEnv(t, 2)
	start(t, e.options(t, 8))
	reg := e.kubelet.WaitRegistration(t, 2*time.Second)
	c := e.kubelet.Dial(t, reg.Endpoint)
	devs := kubeletfake.ListAndWatch(t, c).WaitFor(t, time.Second, "8 slots", func(m map[string]*pluginapi.Device) bool { return len(m) == 8 })
	for id, d := range devs {
		want := int64(0)
		if id >= "slot-004" {
			want = 1
		}
		if got := d.Topology.Nodes[0].ID; got != want {
			t.Fatalf("%s on node %d, want %d", id, got, want)
		}
	}
	all := []string{"slot-000", "slot-001", "slot-002", "slot-003", "slot-004", "slot-005", "slot-006", "slot-007"}
	for _, tc := range []struct {
		avail, must, want []string
		size              int32
	}{
		{all, nil, []string{"slot-000", "slot-001", "slot-002"}, 3},
		{all, []string{"slot-006"}, []string{"slot-006", "slot-004", "slot-005"}, 3},
		{[]string{"slot-000", "slot-001", "slot-004", "slot-005", "slot-006"}, nil, []string{"slot-004", "slot-005", "slot-006"}, 3},
		{[]string{"slot-000", "slot-004", "slot-005"}, nil, []string{"slot-004", "slot-005", "slot-000"}, 3},
	} {
		resp, err := c.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
			ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: tc.avail, MustIncludeDeviceIDs: tc.must, AllocationSize: tc.size,
			}},
		})
		must(t, err)
		if got := resp.ContainerResponses[0].DeviceIDs; !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("avail %v must %v: got %v want %v", tc.avail, tc.must, got, tc.want)
		}
	}
}

func TestKubeletRestart50(t *testing.T) {
	e := newEnv(t, 1)
	d, _ := start(t, e.options(t, 4))
	k := e.kubelet
	k.WaitRegistration(t, 2*time.Second)
	srv := d.Servers()[0]
	eventually(t, time.Second, "first registration", func() bool { return srv.Registrations() == 1 })
	var worst time.Duration
	for i := range 50 {
		before := srv.Registrations()
		t0 := time.Now()
		k.Restart(t)
		reg := k.WaitRegistration(t, time.Second)
		if dt := time.Since(t0); dt > worst {
			worst = dt
		}
		if reg.ResourceName != socketRes {
			t.Fatalf("restart %d: registration %v", i, reg)
		}
		// Let the Register reply reach the plugin before the next restart
		// cuts the connection.
		eventually(t, time.Second, "plugin saw its registration", func() bool { return srv.Registrations() > before })
	}
	t.Logf("worst re-registration after kubelet restart: %v", worst)
	c := k.Dial(t, "memifnet.io-socket.sock")
	kubeletfake.ListAndWatch(t, c).WaitFor(t, time.Second, "devices after restarts", func(m map[string]*pluginapi.Device) bool { return len(m) == 4 })
	allocate(t, c, []string{"slot-000"})
	if got := srv.Registrations(); got < 51 {
		t.Fatalf("registrations %d", got)
	}

	// The plugin's own socket removed while the kubelet stays.
	t0 := time.Now()
	must(t, os.Remove(filepath.Join(k.DevicePluginDir(), "memifnet.io-socket.sock")))
	k.WaitRegistration(t, time.Second)
	t.Logf("re-registration after own socket removal: %v", time.Since(t0))
	eventually(t, time.Second, "socket served again", func() bool {
		_, err := os.Stat(filepath.Join(k.DevicePluginDir(), "memifnet.io-socket.sock"))
		return err == nil
	})
}

func TestPluginRestartKeepsSlotsInUse(t *testing.T) {
	e := newEnv(t, 1)
	o := e.options(t, 4)
	o.ReclaimGrace = time.Nanosecond
	d, stop := start(t, o)
	reg := e.kubelet.WaitRegistration(t, 2*time.Second)
	eventually(t, 2*time.Second, "initial reclaim", func() bool { return d.Resources()[0].Stats().Dirty == 0 })
	c := e.kubelet.Dial(t, reg.Endpoint)
	// Held before Allocate: with a grace of 1 ns, a reclaim pass between Allocate and a later
	// Hold scrubs the slot as allocated-but-unheld, which is what the grace guards against
	// with a real kubelet (CI hit that window under load).
	e.kubelet.Hold(socketRes, "slot-002")
	resp := allocate(t, c, []string{"slot-002"})
	data := filepath.Join(resp.ContainerResponses[0].Mounts[0].HostPath, "port.json")
	must(t, os.WriteFile(data, []byte("in use"), 0o600))
	stop()

	d2, _ := start(t, o)
	e.kubelet.WaitRegistration(t, 2*time.Second)
	e.kubelet.WaitLists(t, 3, 2*time.Second)
	if b, err := os.ReadFile(data); err != nil || string(b) != "in use" {
		t.Fatalf("slot in use lost after plugin restart: %q %v", b, err)
	}
	if got := d2.Resources()[0].Stats().Dirty; got != 1 {
		t.Fatalf("dirty after restart %d, want 1", got)
	}
	// The pod goes away: now it is scrubbed.
	e.kubelet.Hold(socketRes)
	eventually(t, 2*time.Second, "scrub after the pod left", func() bool {
		_, err := os.Stat(data)
		return os.IsNotExist(err)
	})
}

// TestLostStateScrubsNothingHeld: without its state file the plugin treats every slot as dirty
// and scrubs only what PodResources says nobody holds.
func TestLostStateScrubsNothingHeld(t *testing.T) {
	e := newEnv(t, 1)
	o := e.options(t, 4)
	e.kubelet.Hold(socketRes, "slot-003")
	_, stop := start(t, o)
	stop()
	held := filepath.Join(e.stateDir, "sockets/slot-003/port.json")
	free := filepath.Join(e.stateDir, "sockets/slot-000/port.json")
	must(t, os.WriteFile(held, []byte("x"), 0o600))
	must(t, os.WriteFile(free, []byte("x"), 0o600))
	must(t, os.RemoveAll(filepath.Join(e.stateDir, "deviceplugin")))
	d, _ := start(t, o)
	eventually(t, 2*time.Second, "free slots reclaimed", func() bool { return d.Resources()[0].Stats().Dirty == 1 })
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("held slot scrubbed: %v", err)
	}
	if _, err := os.Stat(free); !os.IsNotExist(err) {
		t.Fatalf("free slot not scrubbed: %v", err)
	}
}

func TestMetricsAndProbes(t *testing.T) {
	e := newEnv(t, 1)
	o := e.options(t, 2)
	o.Version = "v9.9.9-test"
	d, _ := start(t, o)
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + path)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	reg := e.kubelet.WaitRegistration(t, 2*time.Second)
	eventually(t, time.Second, "ready", func() bool { code, _ := get("/readyz"); return code == 200 })
	// The first reclaim scrubs the slots of a fresh state; until it ran both are dirty.
	eventually(t, 2*time.Second, "initial reclaim", func() bool { return d.Resources()[0].Stats().Dirty == 0 })
	allocate(t, e.kubelet.Dial(t, reg.Endpoint), []string{"slot-001"})
	_, body := get("/metrics")
	for _, want := range []string{
		`memifnet_build_info{version="v9.9.9-test"} 1`,
		`memifnet_deviceplugin_allocations_total{resource="memifnet.io/socket"} 1`,
		`memifnet_deviceplugin_devices{health="healthy",resource="memifnet.io/socket"} 2`,
		`memifnet_deviceplugin_devices_dirty{resource="memifnet.io/socket"} 1`,
		`memifnet_deviceplugin_devices_free{resource="memifnet.io/socket"} 1`,
		`memifnet_deviceplugin_devices_scrub_failed{resource="memifnet.io/socket"} 0`,
		`memifnet_deviceplugin_registered{resource="memifnet.io/socket"} 1`,
		`# TYPE memifnet_deviceplugin_scrubs_total counter`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
	// The whole exposition parses, and the runtime's and the process's families are there.
	fams, err := new(expfmt.TextParser).TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, body)
	}
	for _, want := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_open_fds", "process_resident_memory_bytes"} {
		if fams[want] == nil {
			t.Errorf("metrics lack the family %s", want)
		}
	}
	portMetrics(t, e.stateDir, func() string { _, body := get("/metrics"); return body })
}

func TestBadConfigStopsStart(t *testing.T) {
	e := newEnv(t, 1)
	o := e.options(t, 2)
	o.Config.Pools = []config.Pool{{Name: "Bad_Name", PageSize: config.Quantity{Bytes: 2 << 20}, UnitSize: config.Quantity{Bytes: 4 << 20}}}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "pools[0].name") {
		t.Fatalf("got %v", err)
	}
}

// TestCDIDevices: with a CDI directory the plugin writes one spec per resource at start, with a
// bind mount per slot, and Allocate names CDI devices instead of returning mounts.
func TestCDIDevices(t *testing.T) {
	e := newEnv(t, 1)
	o := e.options(t, 4)
	o.CDIDir = filepath.Join(e.root, "cdi")
	start(t, o)
	reg := e.kubelet.WaitRegistration(t, 2*time.Second)
	c := e.kubelet.Dial(t, reg.Endpoint)
	b, err := os.ReadFile(filepath.Join(o.CDIDir, "memifnet.io-socket.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Version string `json:"cdiVersion"`
		Kind    string `json:"kind"`
		Devices []struct {
			Name  string `json:"name"`
			Edits struct {
				Mounts []struct {
					HostPath, ContainerPath string
					Options                 []string
				} `json:"mounts"`
			} `json:"containerEdits"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("CDI spec: %v\n%s", err, b)
	}
	if spec.Version != "0.5.0" || spec.Kind != socketRes || len(spec.Devices) != 4 {
		t.Fatalf("CDI spec %s", b)
	}
	d := spec.Devices[2]
	if d.Name != "slot-002" || len(d.Edits.Mounts) != 1 ||
		d.Edits.Mounts[0].HostPath != filepath.Join(e.stateDir, "sockets/slot-002") ||
		d.Edits.Mounts[0].ContainerPath != "/run/memifnet/slot-002" ||
		!reflect.DeepEqual(d.Edits.Mounts[0].Options, []string{"rbind", "rw"}) {
		t.Fatalf("device %+v", d)
	}
	resp := allocate(t, c, []string{"slot-001", "slot-002"})
	cr := resp.ContainerResponses[0]
	if len(cr.Mounts) != 0 || len(cr.CdiDevices) != 2 ||
		cr.CdiDevices[0].Name != "memifnet.io/socket=slot-001" || cr.CdiDevices[1].Name != "memifnet.io/socket=slot-002" ||
		cr.Envs["MEMIFNET_SOCKETS"] != "slot-001,slot-002" {
		t.Fatalf("allocate response %+v", cr)
	}
}
