package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes/fake"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/events"
)

// TestAttackUnscrubbableSlot: a pod does what it can to make its slot unscrubbable, so that the
// next tenant gets it with its files: it fills the slot's inodes, makes a file, a directory and
// the slot's root immutable (a pod with CAP_LINUX_IMMUTABLE), re-modes the root, and leaves a
// process behind whose working directory is in the slot. None of it stops the scrub (a
// replacement: the old tmpfs is detached, whatever is in it): the next tenant gets an empty slot,
// and the leftover process still sees only the old files. A scrub that fails all the same (a
// fault on the node: the slot's device-info path is a directory the agent cannot remove) takes
// the slot out of service, over the real gRPC API: unhealthy in ListAndWatch, refused by
// Allocate with the reason, the previous tenant's file never handed out, counted in the metrics,
// an Event with the error; the other slot allocates. Once the fault is gone, the health check's
// retried scrub brings it back, empty, with an Event.
func TestAttackUnscrubbableSlot(t *testing.T) {
	e := newEnv(t, 1)
	o := e.options(t, 2)
	o.ReclaimGrace = time.Nanosecond
	d, _ := start(t, o)
	c := e.kubelet.Dial(t, e.kubelet.WaitRegistration(t, 2*time.Second).Endpoint)
	res := d.Resources()[0]
	eventually(t, 2*time.Second, "initial reclaim", func() bool { return res.Stats().Dirty == 0 })
	w := watchHealth(t, c)
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		rec := events.NewRecorder(client, "node-a", "memifnet.io", nil)
		defer rec.Shutdown()
		d.reportDevices(ctx, rec)
	}()
	t.Cleanup(func() { cancel(); <-reported })
	const id = "slot-001"

	// Tenant A does its worst, then leaves.
	e.kubelet.Hold(socketRes, id)
	host := allocate(t, c, []string{id}).ContainerResponses[0].Mounts[0].HostPath
	secret := []byte("tenant A secret")
	must(t, os.Mkdir(filepath.Join(host, "keep"), 0o755))
	must(t, os.WriteFile(filepath.Join(host, "keep", "port.json"), secret, 0o644))
	full := false
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(host, "fill"+strconv.Itoa(i)), nil, 0o644); err != nil {
			full = errors.Is(err, unix.ENOSPC)
			break
		}
	}
	if !full {
		t.Fatal("the slot's inode limit did not stop tenant A")
	}
	leftover := exec.Command("sleep", "600")
	leftover.Dir = filepath.Join(host, "keep")
	must(t, leftover.Start())
	t.Cleanup(func() { _ = leftover.Process.Kill(); _ = leftover.Wait() })
	must(t, os.Chmod(host, 0o700))
	for _, p := range []string{"keep/port.json", "keep", "."} {
		setImmutable(t, filepath.Join(host, p))
	}
	eventually(t, 2*time.Second, "the re-moded slot reported while handed out", func() bool { return w.is(id, pluginapi.Unhealthy) })
	e.kubelet.Hold(socketRes)
	eventually(t, 5*time.Second, "tenant A's slot scrubbed in the background", func() bool {
		return res.Stats().Dirty == 0 && w.is(id, pluginapi.Healthy)
	})
	if !slotIsFreshTmpfs(t, host) {
		t.Fatal("after the scrub the slot is not a fresh, empty tmpfs")
	}
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(leftover.Process.Pid), "cwd", "port.json")); err != nil || string(b) != string(secret) {
		t.Errorf("tenant A's leftover process sees %q (%v) in its old slot, want its own file", b, err)
	}

	// Tenant B gets the empty slot; then its scrub fails.
	e.kubelet.Hold(socketRes, id)
	resp := allocate(t, c, []string{id})
	bHost := resp.ContainerResponses[0].Mounts[0].HostPath
	if ents, err := os.ReadDir(bHost); err != nil || len(ents) != 0 {
		t.Fatalf("tenant B's slot holds %v (%v)", ents, err)
	}
	must(t, os.WriteFile(filepath.Join(bHost, "port.json"), []byte("tenant B secret"), 0o644))
	info := devinfo.Writer{Dir: e.devinfoDir}.Path(socketRes, id)
	must(t, os.Remove(info))
	must(t, os.MkdirAll(filepath.Join(info, "x"), 0o755))
	e.kubelet.Hold(socketRes)
	eventually(t, 5*time.Second, "the slot out of service after its scrub failed", func() bool { return w.is(id, pluginapi.Unhealthy) })
	if err := allocateErr(c, id); err == nil || !strings.Contains(err.Error(), id+" unhealthy") || !strings.Contains(err.Error(), "remove device-info") {
		t.Errorf("Allocate of the slot whose scrub failed: %v, want a refusal with the reason", err)
	}
	if b, err := os.ReadFile(filepath.Join(bHost, "port.json")); err != nil || string(b) != "tenant B secret" {
		t.Errorf("the failed scrub did not get as far as the tenant's file: %q %v", b, err)
	}
	eventually(t, 5*time.Second, "an Event naming the slot and the error", func() bool {
		evs := nodeEvents(t, client, events.ReasonScrubFailed)
		return len(evs) == 1 && strings.Contains(evs[0].Message, id) && strings.Contains(evs[0].Message, "remove device-info")
	})
	m := metricsText(t, d)
	for _, want := range []string{
		`memifnet_deviceplugin_devices_scrub_failed{resource="memifnet.io/socket"} 1`,
		`memifnet_deviceplugin_scrub_errors_total{resource="memifnet.io/socket"} 1`, // once, not at every retry
		`memifnet_deviceplugin_devices{health="unhealthy",resource="memifnet.io/socket"} 1`,
		`memifnet_devices_out_of_service{backend="deviceplugin",resource="memifnet.io/socket",state="scrub_failed"} 1`,
		`memifnet_devices_out_of_service{backend="deviceplugin",resource="memifnet.io/socket",state="withheld"} 0`,
		`memifnet_device_scrub_errors_total{backend="deviceplugin",resource="memifnet.io/socket"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
	e.kubelet.Hold(socketRes, "slot-000")
	allocate(t, c, []string{"slot-000"})

	must(t, os.RemoveAll(info))
	eventually(t, 5*time.Second, "the slot back in service", func() bool { return w.is(id, pluginapi.Healthy) })
	eventually(t, 5*time.Second, "an Event when the slot is back", func() bool {
		evs := nodeEvents(t, client, events.ReasonRecovered)
		return len(evs) == 1 && strings.Contains(evs[0].Message, id)
	})
	resp = allocate(t, c, []string{id})
	if ents, err := os.ReadDir(resp.ContainerResponses[0].Mounts[0].HostPath); err != nil || len(ents) != 0 {
		t.Fatalf("the next tenant's slot holds %v (%v)", ents, err)
	}
	if st := res.Stats(); st.ScrubFailed != 0 || st.ScrubErrors != 1 {
		t.Errorf("stats %+v, want none out of service, 1 scrub error", st)
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h (x/sys/unix does not define it).
const fsImmutableFL = 0x10

// setImmutable sets FS_IMMUTABLE_FL on path (tmpfs supports it since Linux 6.0).
func setImmutable(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	must(t, err)
	must(t, unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsImmutableFL)))
}
