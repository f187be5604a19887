package podresources

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/memifnet/memifnet/internal/kubeletfake"
	"github.com/memifnet/memifnet/internal/names"
)

// serve runs the kubelet stand-in, a grpc-go server of the real generated service, and returns
// its socket.
func serve(t *testing.T, k *kubeletfake.Kubelet) string {
	dir := t.TempDir()
	k.ServePodResources(t, dir)
	return filepath.Join(dir, "pod-resources", "kubelet.sock")
}

func slots(ids ...string) map[string][]string { return map[string][]string{names.SocketResource: ids} }

func TestSlotsGetAndListFallback(t *testing.T) {
	for _, noGet := range []bool{false, true} {
		k := kubeletfake.New()
		k.SetNoGet(noGet)
		k.SetPod(kubeletfake.Pod{Namespace: "ns", Name: "a", Devices: slots("slot-007", "slot-002")})
		k.SetPod(kubeletfake.Pod{Namespace: "ns", Name: "b", Devices: slots("slot-001")})
		sock := serve(t, k)
		got, err := Slots(context.Background(), sock, "ns", "a")
		if err != nil {
			t.Fatalf("noGet=%v: %v", noGet, err)
		}
		if want := []string{"slot-002", "slot-007"}; !slices.Equal(got, want) {
			t.Errorf("noGet=%v: slots %v, want %v", noGet, got, want)
		}
		if k.Gets() != 1 || k.Lists() != map[bool]int64{false: 0, true: 1}[noGet] {
			t.Errorf("noGet=%v: %d Get and %d List calls", noGet, k.Gets(), k.Lists())
		}
		// An unknown pod: Get says NotFound, List does not have it: no slots, no error.
		got, err = Slots(context.Background(), sock, "ns", "nobody")
		if err != nil || got != nil {
			t.Errorf("noGet=%v: unknown pod: %v, %v", noGet, got, err)
		}
	}
}

func TestSlotsErrors(t *testing.T) {
	_, err := Slots(context.Background(), filepath.Join(t.TempDir(), "missing.sock"), "ns", "a")
	if err == nil || !strings.Contains(err.Error(), "missing.sock") {
		t.Errorf("missing socket: %v", err)
	}

	// A server that accepts and never answers: the context bounds the call.
	sock := filepath.Join(t.TempDir(), "mute.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Slots(ctx, sock, "ns", "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("mute server: %v", err)
	}
}

// fixedServer answers Get and List with one pod, as a kubelet with several containers would.
type fixedServer struct {
	api.UnimplementedPodResourcesListerServer
	pod *api.PodResources
}

func (s fixedServer) Get(context.Context, *api.GetPodResourcesRequest) (*api.GetPodResourcesResponse, error) {
	return &api.GetPodResourcesResponse{PodResources: s.pod}, nil
}

// Containers keep the kubelet's order, each container's slots are sorted, other resources and
// repeated IDs are left out, and every other field of the schema is read without harm.
func TestSlotsOrder(t *testing.T) {
	topo := &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: 1}}}
	pod := &api.PodResources{Name: "a", Namespace: "ns", Containers: []*api.ContainerResources{{
		Name: "init",
		Devices: []*api.ContainerDevices{
			{ResourceName: "example.com/gpu", DeviceIds: []string{"gpu0"}, Topology: topo},
			{ResourceName: names.SocketResource, DeviceIds: []string{"slot-003", "slot-001", "slot-003"}, Topology: topo},
		},
		CpuIds: []int64{0, 1},
		Memory: []*api.ContainerMemory{{MemoryType: "hugepages-2Mi", Size: 1 << 30, Topology: topo}},
		DynamicResources: []*api.DynamicResource{{ClaimName: "c", ClaimNamespace: "ns",
			ClaimResources: []*api.ClaimResource{{CdiDevices: []*api.CDIDevice{{Name: "vendor/x=y"}}, DriverName: "d"}}}},
	}, {
		Name:    "app",
		Devices: []*api.ContainerDevices{{ResourceName: names.SocketResource, DeviceIds: []string{"slot-000", "slot-001"}}},
	}}}
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	api.RegisterPodResourcesListerServer(srv, fixedServer{pod: pod})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	got, err := Slots(context.Background(), sock, "ns", "a")
	if want := []string{"slot-001", "slot-003", "slot-000"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("slots %v, %v; want %v", got, err, want)
	}
}
