package resource_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/cdi"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/slots"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/ledger"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/resource"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/internal/tmpfs"
)

// TestAllocate runs Allocate over the real slot provider in a temp dir: which devices it scrubs
// (only dirty ones), what it refuses (unknown, unhealthy, a failed scrub: all or nothing), what it
// records in the ledger and what each container gets (mounts or CDI names, and the env).
func TestAllocate(t *testing.T) {
	const slotCount = 4
	ids := slots.IDs(slotCount) // slot-000 .. slot-003
	type want struct {
		err      string          // a substring of the error; "" for success
		scrubbed []string        // slots emptied by this Allocate
		envs     []string        // MEMIFNET_SOCKETS per container
		mounts   [][]string      // host dirs per container (nil in CDI mode)
		cdi      [][]string      // CDI names per container
		dirty    map[string]bool // ledger afterwards, for the slots named
		health   map[string]bool // healthy afterwards, for the slots named
		stats    func(resource.Stats) string
	}
	for _, tc := range []struct {
		name  string
		dirty []string                   // slots dirty before Allocate (others clean)
		setup func(t *testing.T, p *env) // damage before New
		cdi   bool
		req   [][]string // device IDs per container
		want  want
	}{
		{name: "clean slot: no scrub", req: [][]string{{"slot-001"}}, want: want{
			envs: []string{"slot-001"}, mounts: [][]string{{"slot-001"}}, dirty: map[string]bool{"slot-001": true},
			stats: func(s resource.Stats) string { return check(s.SyncScrubs == 0 && s.Allocations == 1, "%+v", s) },
		}},
		{name: "dirty slot: scrubbed first", dirty: []string{"slot-002"}, req: [][]string{{"slot-002"}}, want: want{
			scrubbed: []string{"slot-002"}, envs: []string{"slot-002"}, mounts: [][]string{{"slot-002"}},
			dirty: map[string]bool{"slot-002": true},
			stats: func(s resource.Stats) string { return check(s.SyncScrubs == 1, "%+v", s) },
		}},
		{name: "two containers", dirty: []string{"slot-003"}, req: [][]string{{"slot-000", "slot-003"}, {"slot-001"}}, want: want{
			scrubbed: []string{"slot-003"}, envs: []string{"slot-000,slot-003", "slot-001"},
			mounts: [][]string{{"slot-000", "slot-003"}, {"slot-001"}},
			dirty:  map[string]bool{"slot-000": true, "slot-001": true, "slot-003": true, "slot-002": false},
			stats:  func(s resource.Stats) string { return check(s.SyncScrubs == 1 && s.Allocations == 2, "%+v", s) },
		}},
		{name: "CDI names instead of mounts", cdi: true, req: [][]string{{"slot-000", "slot-001"}}, want: want{
			envs: []string{"slot-000,slot-001"},
			cdi:  [][]string{{names.SocketResource + "=slot-000", names.SocketResource + "=slot-001"}},
		}},
		{name: "unknown device: nothing happens", dirty: []string{"slot-000"}, req: [][]string{{"slot-000", "slot-9"}}, want: want{
			err: `unknown device "slot-9"`, dirty: map[string]bool{"slot-000": true},
			stats: func(s resource.Stats) string { return check(s.SyncScrubs == 0 && s.Allocations == 0, "%+v", s) },
		}},
		{name: "unhealthy device: refused", dirty: []string{"slot-000", "slot-001"},
			// Damaged while handed out: reported, not rebuilt (a pod may be using it).
			setup: func(t *testing.T, e *env) { must(t, os.Chmod(e.slot("slot-001"), 0o755)) },
			req:   [][]string{{"slot-000"}, {"slot-001"}}, want: want{
				err: "slot-001 unhealthy", dirty: map[string]bool{"slot-000": true, "slot-001": true}, health: map[string]bool{"slot-001": false},
				stats: func(s resource.Stats) string { return check(s.SyncScrubs == 0 && s.Unhealthy == 1, "%+v", s) },
			}},
		{name: "damaged free device: rebuilt, then handed out",
			setup: func(t *testing.T, e *env) { must(t, os.Chmod(e.slot("slot-001"), 0o755)) },
			req:   [][]string{{"slot-001"}}, want: want{
				scrubbed: []string{"slot-001"}, envs: []string{"slot-001"}, mounts: [][]string{{"slot-001"}},
				health: map[string]bool{"slot-001": true},
				stats:  func(s resource.Stats) string { return check(s.SyncScrubs == 0 && s.Unhealthy == 0, "%+v", s) },
			}},
		{name: "failed scrub: refused, device unhealthy", dirty: []string{"slot-002"},
			setup: func(t *testing.T, e *env) {
				// A directory where the slot's device-info file goes: the scrub cannot remove it.
				must(t, os.MkdirAll(filepath.Join(e.devinfo.Path(names.SocketResource, "slot-002"), "x"), 0o755))
			},
			req: [][]string{{"slot-002"}}, want: want{
				err: "remove device-info", health: map[string]bool{"slot-002": false}, dirty: map[string]bool{"slot-002": true},
				stats: func(s resource.Stats) string { return check(s.ScrubErrors == 1 && s.Unhealthy == 1, "%+v", s) },
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, ids)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			// Every slot holds a previous tenant's file; the ledger says which are dirty.
			for _, id := range ids {
				must(t, os.WriteFile(filepath.Join(e.slot(id), "port.json"), []byte("old tenant"), 0o644))
			}
			led, _ := ledger.Open(filepath.Join(e.root, "ledger"), ids)
			for _, id := range ids {
				if !slices.Contains(tc.dirty, id) {
					led.Clean(id, led.DirtyIDs()[id].AllocatedAt)
				}
			}
			var cw *cdi.Writer
			if tc.cdi {
				cw = &cdi.Writer{Dir: filepath.Join(e.root, "cdi")}
			}
			r, err := resource.New(e.provider, led, slog.New(slog.NewTextHandler(io.Discard, nil)), cw)
			must(t, err)

			req := &pluginapi.AllocateRequest{}
			for _, c := range tc.req {
				req.ContainerRequests = append(req.ContainerRequests, &pluginapi.ContainerAllocateRequest{DevicesIds: c})
			}
			resp, err := r.Allocate(req)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("Allocate: %v, want an error containing %q", err, tc.want.err)
				}
			} else if err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			for _, id := range ids {
				_, statErr := os.Stat(filepath.Join(e.slot(id), "port.json"))
				if gone := os.IsNotExist(statErr); gone != slices.Contains(tc.want.scrubbed, id) {
					t.Errorf("%s: old tenant's file gone = %v, want %v", id, gone, slices.Contains(tc.want.scrubbed, id))
				}
			}
			if err == nil {
				var envs []string
				var mounts, cdis [][]string
				for _, cr := range resp.ContainerResponses {
					envs = append(envs, cr.Envs[names.EnvSockets])
					var ms, cs []string
					for _, m := range cr.Mounts {
						if m.ContainerPath != names.ContainerDir+"/"+filepath.Base(m.HostPath) || m.ReadOnly {
							t.Errorf("mount %+v", m)
						}
						ms = append(ms, filepath.Base(m.HostPath))
					}
					for _, c := range cr.CdiDevices {
						cs = append(cs, c.Name)
					}
					if ms != nil {
						mounts = append(mounts, ms)
					}
					if cs != nil {
						cdis = append(cdis, cs)
					}
				}
				if !reflect.DeepEqual(envs, tc.want.envs) || !reflect.DeepEqual(mounts, tc.want.mounts) || !reflect.DeepEqual(cdis, tc.want.cdi) {
					t.Errorf("containers got env %q, mounts %q, CDI %q; want %q, %q, %q", envs, mounts, cdis, tc.want.envs, tc.want.mounts, tc.want.cdi)
				}
			}
			for id, want := range tc.want.dirty {
				if _, dirty := led.Dirty(id); dirty != want {
					t.Errorf("%s: dirty = %v after Allocate, want %v", id, dirty, want)
				}
			}
			devs, _ := r.Devices()
			for _, d := range devs {
				if want, ok := tc.want.health[d.ID]; ok && (d.Health == pluginapi.Healthy) != want {
					t.Errorf("%s: health %s, want healthy = %v", d.ID, d.Health, want)
				}
			}
			if tc.want.stats != nil {
				if msg := tc.want.stats(r.Stats()); msg != "" {
					t.Errorf("stats: %s", msg)
				}
			}
		})
	}
}

type env struct {
	root     string
	provider *slots.Provider
	devinfo  devinfo.Writer
}

func newEnv(t *testing.T, ids []string) *env {
	testutil.RequireRoot(t, "slots are tmpfs mounts")
	root := t.TempDir()
	t.Cleanup(func() { testutil.UnmountUnder(t, root) })
	e := &env{root: root, devinfo: devinfo.Writer{Dir: filepath.Join(root, "devinfo")}}
	p, err := slots.New(filepath.Join(root, "state"), len(ids), nil, tmpfs.Limits{Size: 1 << 20, Inodes: 64}, e.devinfo,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	must(t, err)
	e.provider = p
	return e
}

func (e *env) slot(id string) string { return e.provider.Dir(id) }

// check returns "" when ok, else the formatted complaint.
func check(ok bool, format string, a ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, a...)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestScrubFailureTakesDeviceOutOfService breaks a dirty slot's scrub for real (its device-info
// path is a directory the scrub cannot remove, or its mount point is a file no tmpfs can go on),
// with the scrub run in the background (Reclaim), inside Allocate, or by the health check
// rebuilding a clean slot it found damaged (its tmpfs gone). The slot goes out of
// service: unhealthy in the device list (watchers woken), refused by Allocate with the reason,
// counted, its previous tenant's file never handed out. Every health check scrubs it again; while
// the cause is there it stays out, once it is gone the slot is clean and healthy and allocates
// empty.
func TestScrubFailureTakesDeviceOutOfService(t *testing.T) {
	ids := slots.IDs(2)
	const id = "slot-001"
	for _, brk := range []struct {
		name       string
		want       string // in the failure
		tenantGone bool   // breaking it took the old tmpfs, with the tenant's file
		brk, fix   func(t *testing.T, e *env)
	}{
		{name: "device-info path", want: "remove device-info",
			brk: func(t *testing.T, e *env) {
				must(t, os.MkdirAll(filepath.Join(e.devinfo.Path(names.SocketResource, id), "x"), 0o755))
			},
			fix: func(t *testing.T, e *env) { must(t, os.RemoveAll(e.devinfo.Path(names.SocketResource, id))) }},
		{name: "mount point", want: "not a directory", tenantGone: true,
			brk: func(t *testing.T, e *env) {
				must(t, unix.Unmount(e.slot(id), unix.MNT_DETACH))
				must(t, os.Remove(e.slot(id)))
				must(t, os.WriteFile(e.slot(id), []byte("not a directory"), 0o644))
			},
			fix: func(t *testing.T, e *env) { must(t, os.Remove(e.slot(id))) }},
	} {
		for _, where := range []string{"reclaim", "allocate", "health check"} {
			if where == "health check" && !brk.tenantGone {
				continue // a check finds nothing wrong with the slot itself
			}
			t.Run(brk.name+"/"+where, func(t *testing.T) {
				e := newEnv(t, ids)
				must(t, os.WriteFile(filepath.Join(e.slot(id), "port.json"), []byte("old tenant"), 0o644))
				led, _ := ledger.Open(filepath.Join(e.root, "ledger"), ids) // every slot dirty
				if where == "health check" {
					led.Clean(id, led.DirtyIDs()[id].AllocatedAt) // a free slot: rebuilt when damaged
				}
				r, err := resource.New(e.provider, led, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
				must(t, err)
				brk.brk(t, e)
				_, changed := r.Devices()

				var failure error
				switch where {
				case "reclaim":
					if n := r.Reclaim(t.Context(), nil, time.Now(), 0); n != 1 {
						t.Fatalf("reclaim scrubbed %d slots, want 1 (the other)", n)
					}
				case "allocate":
					failure = allocateErr(r, id)
					if failure == nil || !strings.Contains(failure.Error(), brk.want) {
						t.Fatalf("Allocate with a failing scrub: %v, want an error containing %q", failure, brk.want)
					}
				case "health check":
					r.CheckHealth()
				}
				select {
				case <-changed:
				default:
					t.Error("watchers were not woken")
				}
				outOfService := func(when string) {
					t.Helper()
					if h := health(r, id); h != pluginapi.Unhealthy {
						t.Errorf("%s: %s is %s, want Unhealthy", when, id, h)
					}
					if st := r.Stats(); st.ScrubFailed != 1 || st.ScrubErrors != 1 || st.Unhealthy != 1 {
						t.Errorf("%s: stats %+v, want 1 scrub failed, 1 scrub error, 1 unhealthy", when, st)
					}
					if f := r.ScrubFailures()[id]; !errors.Is(f, device.ErrScrubFailed) || !strings.Contains(f.Error(), brk.want) {
						t.Errorf("%s: scrub failure of %s: %v, want device.ErrScrubFailed containing %q", when, id, f, brk.want)
					}
					if err := allocateErr(r, id); err == nil || !strings.Contains(err.Error(), id+" unhealthy") || !strings.Contains(err.Error(), brk.want) {
						t.Errorf("%s: Allocate of the slot: %v, want a refusal with the reason", when, err)
					}
					if _, err := os.Stat(filepath.Join(e.slot(id), "port.json")); !brk.tenantGone && err != nil {
						t.Errorf("%s: the old tenant's file: %v (the failed scrub did not get that far)", when, err)
					}
				}
				outOfService("after the failure")
				r.CheckHealth() // the retry fails the same way
				outOfService("after a failed retry")

				brk.fix(t, e)
				r.CheckHealth()
				if h := health(r, id); h != pluginapi.Healthy {
					t.Fatalf("after the cause is gone: %s is %s (%v)", id, h, r.ScrubFailures()[id])
				}
				if st := r.Stats(); st.ScrubFailed != 0 || st.Unhealthy != 0 {
					t.Errorf("stats %+v, want none failed or unhealthy", st)
				}
				if _, dirty := led.Dirty(id); dirty {
					t.Errorf("%s still dirty after the retried scrub worked", id)
				}
				if err := allocateErr(r, id); err != nil {
					t.Fatalf("Allocate after the retry worked: %v", err)
				}
				if ents, err := os.ReadDir(e.slot(id)); err != nil || len(ents) != 0 {
					t.Errorf("the next tenant's slot holds %v (%v)", ents, err)
				}
			})
		}
	}
}

func allocateErr(r *resource.Resource, ids ...string) error {
	_, err := r.Allocate(&pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	return err
}

func health(r *resource.Resource, id string) string {
	devs, _ := r.Devices()
	for _, d := range devs {
		if d.ID == id {
			return d.Health
		}
	}
	return "missing"
}
