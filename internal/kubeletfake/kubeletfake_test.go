package kubeletfake_test

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/memifnet/memifnet/internal/kubeletfake"
	"github.com/memifnet/memifnet/internal/names"
)

// The PodResources stand-in answers a client of the real generated API as a kubelet would.
func TestPodResources(t *testing.T) {
	dir := t.TempDir()
	k := kubeletfake.New()
	k.SetPod(kubeletfake.Pod{Namespace: "ns", Name: "a", Devices: map[string][]string{
		names.SocketResource: {"slot-001"}, "memifnet.io/hugepool": {"hugepool-n0-000"}}})
	k.Hold(names.SocketResource, "slot-002")
	k.SetAllocatable(names.SocketResource, "slot-000", "slot-001", "slot-002")
	k.ServePodResources(t, dir)
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, names.PodResourcesSocket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := api.NewPodResourcesListerClient(conn)
	ctx := context.Background()

	list, err := c.List(ctx, &api.ListPodResourcesRequest{})
	if err != nil || len(list.PodResources) != 2 || k.Lists() != 1 {
		t.Fatalf("List: %v, %v (%d calls)", list, err, k.Lists())
	}
	got, err := c.Get(ctx, &api.GetPodResourcesRequest{PodNamespace: "ns", PodName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	devs := got.PodResources.Containers[0].Devices
	if len(devs) != 2 || devs[0].ResourceName != "memifnet.io/hugepool" || devs[1].ResourceName != names.SocketResource ||
		len(devs[1].DeviceIds) != 1 || devs[1].DeviceIds[0] != "slot-001" {
		t.Errorf("Get ns/a: %v", got)
	}
	if _, err := c.Get(ctx, &api.GetPodResourcesRequest{PodNamespace: "ns", PodName: "nobody"}); status.Code(err) != codes.NotFound {
		t.Errorf("Get of a missing pod: %v, want NotFound", err)
	}
	k.SetNoGet(true)
	if _, err := c.Get(ctx, &api.GetPodResourcesRequest{PodNamespace: "ns", PodName: "a"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("Get with SetNoGet: %v, want Unimplemented", err)
	}
	if k.Gets() != 3 {
		t.Errorf("%d Get calls counted, want 3", k.Gets())
	}
	alloc, err := c.GetAllocatableResources(ctx, &api.AllocatableResourcesRequest{})
	if err != nil || len(alloc.Devices) != 1 || len(alloc.Devices[0].DeviceIds) != 3 {
		t.Errorf("GetAllocatableResources: %v, %v", alloc, err)
	}
}
