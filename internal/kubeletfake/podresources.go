package kubeletfake

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/memifnet/memifnet/internal/names"
)

// podResourcesServer is the PodResources v1 service over the kubelet's pods.
type podResourcesServer struct {
	api.UnimplementedPodResourcesListerServer
	k *Kubelet
}

// ServePodResources serves PodResources on <kubeletDir>/pod-resources/kubelet.sock until the test
// ends.
func (k *Kubelet) ServePodResources(t testing.TB, kubeletDir string) {
	t.Helper()
	sock := filepath.Join(kubeletDir, names.PodResourcesSocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	api.RegisterPodResourcesListerServer(srv, &podResourcesServer{k: k})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

// List answers with every pod.
func (s *podResourcesServer) List(context.Context, *api.ListPodResourcesRequest) (*api.ListPodResourcesResponse, error) {
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.lists.Add(1)
	r := &api.ListPodResourcesResponse{}
	for _, p := range k.pods {
		r.PodResources = append(r.PodResources, podResourcesOf(p))
	}
	return r, nil
}

// Get answers for one pod: NotFound for a pod the kubelet does not have, Unimplemented after
// SetNoGet(true).
func (s *podResourcesServer) Get(_ context.Context, req *api.GetPodResourcesRequest) (*api.GetPodResourcesResponse, error) {
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.gets.Add(1)
	if k.noGet {
		return nil, status.Error(codes.Unimplemented, "KubeletPodResourcesGet is disabled")
	}
	p, ok := k.pods[req.PodNamespace+"/"+req.PodName]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod %s/%s not found", req.PodNamespace, req.PodName)
	}
	return &api.GetPodResourcesResponse{PodResources: podResourcesOf(p)}, nil
}

// GetAllocatableResources answers with the devices SetAllocatable set.
func (s *podResourcesServer) GetAllocatableResources(context.Context, *api.AllocatableResourcesRequest) (*api.AllocatableResourcesResponse, error) {
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &api.AllocatableResourcesResponse{}
	for _, res := range sortedKeys(k.allocatable) {
		r.Devices = append(r.Devices, &api.ContainerDevices{ResourceName: res, DeviceIds: k.allocatable[res]})
	}
	return r, nil
}

// WaitLists waits until at least n more List calls have been answered, so a test knows the code
// under test has seen the current holdings, or fails after d.
func (k *Kubelet) WaitLists(t testing.TB, n int64, d time.Duration) {
	t.Helper()
	want := k.lists.Load() + n
	deadline := time.Now().Add(d)
	for k.lists.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d PodResources List calls within %v", n, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
