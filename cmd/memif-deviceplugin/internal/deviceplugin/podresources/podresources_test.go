package podresources

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/grpc"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
)

type lister struct {
	api.UnimplementedPodResourcesListerServer
	resp *api.ListPodResourcesResponse
}

func (l lister) List(context.Context, *api.ListPodResourcesRequest) (*api.ListPodResourcesResponse, error) {
	return l.resp, nil
}

// TestDRAPods: each device of the driver maps to the pod whose container holds it; other
// drivers' devices and device plugin devices are not in the map.
func TestDRAPods(t *testing.T) {
	claim := func(driver string, devs ...string) *api.DynamicResource {
		d := &api.DynamicResource{ClaimName: "link", ClaimNamespace: "ns"}
		for _, n := range devs {
			d.ClaimResources = append(d.ClaimResources, &api.ClaimResource{DriverName: driver, PoolName: "node", DeviceName: n})
		}
		return d
	}
	resp := &api.ListPodResourcesResponse{PodResources: []*api.PodResources{
		{Namespace: "ns", Name: "rx", Containers: []*api.ContainerResources{{Name: "app",
			DynamicResources: []*api.DynamicResource{claim("memifnet.io", "dra-slot-000"), claim("gpu.example.com", "gpu-0")},
			Devices:          []*api.ContainerDevices{{ResourceName: "memifnet.io/socket", DeviceIds: []string{"slot-001"}}}}}},
		{Namespace: "ns", Name: "tx", Containers: []*api.ContainerResources{{Name: "app",
			DynamicResources: []*api.DynamicResource{claim("memifnet.io", "dra-slot-001")}}}},
	}}
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	api.RegisterPodResourcesListerServer(srv, lister{resp: resp})
	go srv.Serve(ln)
	defer srv.Stop()
	c, err := New(sock, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.DRAPods(context.Background(), "memifnet.io")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]PodRef{"dra-slot-000": {"ns", "rx"}, "dra-slot-001": {"ns", "tx"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
