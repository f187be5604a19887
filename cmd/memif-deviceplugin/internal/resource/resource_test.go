package resource_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/cdi"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/ledger"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/resource"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/slots"
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
