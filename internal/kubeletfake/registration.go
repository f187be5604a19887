package kubeletfake

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registration is the device-plugin Registration service on <kubeletDir>/device-plugins/kubelet.sock.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	dir  string
	regs chan *pluginapi.RegisterRequest
	srv  *grpc.Server
}

// Register records the request for WaitRegistration.
func (r *registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r.regs <- req
	return &pluginapi.Empty{}, nil
}

// ServeRegistration serves the device-plugin Registration service on
// <kubeletDir>/device-plugins/kubelet.sock until the test ends.
func (k *Kubelet) ServeRegistration(t testing.TB, kubeletDir string) {
	t.Helper()
	// Base of "/var/lib/kubelet/device-plugins/": the directory's name under the kubelet root.
	r := &registration{dir: filepath.Join(kubeletDir, filepath.Base(pluginapi.DevicePluginPath)),
		regs: make(chan *pluginapi.RegisterRequest, 100)}
	r.serve(t)
	k.reg = r
}

func (r *registration) serve(t testing.TB) {
	t.Helper()
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", filepath.Join(r.dir, filepath.Base(pluginapi.KubeletSocket)))
	if err != nil {
		t.Fatal(err)
	}
	r.srv = grpc.NewServer()
	pluginapi.RegisterRegistrationServer(r.srv, r)
	go func() { _ = r.srv.Serve(lis) }()
	t.Cleanup(r.srv.Stop)
}

// DevicePluginDir is the directory where device plugins put their sockets and the kubelet its
// kubelet.sock (ServeRegistration must have run).
func (k *Kubelet) DevicePluginDir() string { return k.reg.dir }

// Restart restarts the Registration service as a kubelet restart does: it stops it, wipes the
// device-plugins directory (keeping the kubelet's checkpoint file, as the real kubelet does at
// start) and serves a new kubelet.sock. Registrations not yet waited for are dropped, so that the
// next WaitRegistration returns one made to the new kubelet.sock.
func (k *Kubelet) Restart(t testing.TB) {
	t.Helper()
	r := k.reg
	r.srv.Stop()
	for len(r.regs) > 0 {
		<-r.regs
	}
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "kubelet_internal_checkpoint" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(r.dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	r.serve(t)
}

// WaitRegistration returns the next registration, or fails after d.
func (k *Kubelet) WaitRegistration(t testing.TB, d time.Duration) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.reg.regs:
		return r
	case <-time.After(d):
		t.Fatalf("no registration within %v", d)
		return nil
	}
}

// Dial connects to a device plugin's endpoint (a socket in the device-plugins directory), as the
// kubelet does after a registration.
func (k *Kubelet) Dial(t testing.TB, endpoint string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.reg.dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// Watch follows a device plugin's ListAndWatch stream.
type Watch struct {
	updates chan []*pluginapi.Device
}

// ListAndWatch starts following a device plugin's device list, as the kubelet does.
func ListAndWatch(t testing.TB, c pluginapi.DevicePluginClient) *Watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &Watch{updates: make(chan []*pluginapi.Device, 1000)}
	go func() {
		defer close(w.updates)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			w.updates <- r.Devices
		}
	}()
	t.Cleanup(cancel)
	return w
}

// WaitFor returns the first device list (by ID) for which ok holds, or fails after d.
func (w *Watch) WaitFor(t testing.TB, d time.Duration, what string, ok func(map[string]*pluginapi.Device) bool) map[string]*pluginapi.Device {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case devs, open := <-w.updates:
			if !open {
				t.Fatalf("ListAndWatch ended while waiting for %s", what)
			}
			m := map[string]*pluginapi.Device{}
			for _, dv := range devs {
				m[dv.ID] = dv
			}
			if ok(m) {
				return m
			}
		case <-deadline:
			t.Fatalf("no ListAndWatch update with %s within %v", what, d)
			return nil
		}
	}
}
