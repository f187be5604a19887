// Package kubelettest has stand-ins for the kubelet's Registration and
// PodResources services, built from the real k8s.io/kubelet API types, for
// tests that drive the plugin over its real gRPC sockets.
package kubelettest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Kubelet serves Registration on <dir>/kubelet.sock.
type Kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	Dir  string
	Regs chan *pluginapi.RegisterRequest
	srv  *grpc.Server
}

// StartKubelet serves in dir (a device-plugins directory).
func StartKubelet(t testing.TB, dir string) *Kubelet {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := &Kubelet{Dir: dir, Regs: make(chan *pluginapi.RegisterRequest, 100), srv: grpc.NewServer()}
	lis, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(lis) }()
	t.Cleanup(k.srv.Stop)
	return k
}

// Register records the request.
func (k *Kubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.Regs <- r
	return &pluginapi.Empty{}, nil
}

// Restart stops the kubelet, wipes the directory as the real kubelet does
// at start (keeping its checkpoint file) and serves a new kubelet.sock.
func (k *Kubelet) Restart(t testing.TB) *Kubelet {
	t.Helper()
	k.srv.Stop()
	ents, err := os.ReadDir(k.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "kubelet_internal_checkpoint" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(k.Dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return StartKubelet(t, k.Dir)
}

// WaitRegistration returns the next registration or fails after d.
func (k *Kubelet) WaitRegistration(t testing.TB, d time.Duration) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.Regs:
		return r
	case <-time.After(d):
		t.Fatalf("no registration within %v", d)
		return nil
	}
}

// Dial connects to a plugin endpoint in the directory.
func (k *Kubelet) Dial(t testing.TB, endpoint string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.Dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// Watch follows ListAndWatch.
type Watch struct {
	updates chan []*pluginapi.Device
	cancel  context.CancelFunc
}

// ListAndWatch starts following the plugin's device list.
func ListAndWatch(t testing.TB, c pluginapi.DevicePluginClient) *Watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &Watch{updates: make(chan []*pluginapi.Device, 1000), cancel: cancel}
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

// WaitFor returns the first device list for which ok holds, or fails after d.
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

// PodResources serves List on a socket with the devices set by Hold.
type PodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	mu    sync.Mutex
	held  map[string][]string // resource -> device IDs
	Lists atomic.Int64
}

// StartPodResources serves on path.
func StartPodResources(t testing.TB, path string) *PodResources {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &PodResources{held: map[string][]string{}}
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return p
}

// Hold sets the devices one pod holds for resource.
func (p *PodResources) Hold(resource string, ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held[resource] = ids
}

// List answers with one pod holding the held devices.
func (p *PodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.Lists.Add(1)
	ctr := &podresourcesapi.ContainerResources{Name: "app"}
	for r, ids := range p.held {
		ctr.Devices = append(ctr.Devices, &podresourcesapi.ContainerDevices{ResourceName: r, DeviceIds: ids})
	}
	return &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		{Name: "tenant", Namespace: "default", Containers: []*podresourcesapi.ContainerResources{ctr}},
	}}, nil
}

// WaitLists waits until at least n more List calls have been answered,
// so a test knows the plugin has seen the current holdings.
func (p *PodResources) WaitLists(t testing.TB, n int64, d time.Duration) {
	t.Helper()
	want := p.Lists.Load() + n
	deadline := time.Now().Add(d)
	for p.Lists.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d PodResources List calls within %v", n, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
