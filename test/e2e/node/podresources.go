package node

import (
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// SocketResource is the device plugin's slot resource.
const SocketResource = "memifnet.io/socket"

// FakePodResources stands in for the kubelet's PodResources service in Tier 1, where no kubelet
// runs: it says which slots each pod holds, as the real one does after Allocate.
type FakePodResources struct {
	podresources.UnimplementedPodResourcesListerServer
	mu    sync.Mutex
	slots map[string][]string // namespace/name -> slots
	srv   *grpc.Server
}

// ServeFakePodResources serves on <kubeletDir>/pod-resources/kubelet.sock until Teardown.
func (s *Stack) ServeFakePodResources(kubeletDir string) (*FakePodResources, error) {
	sock := filepath.Join(kubeletDir, "pod-resources", "kubelet.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	f := &FakePodResources{slots: map[string][]string{}, srv: grpc.NewServer()}
	podresources.RegisterPodResourcesListerServer(f.srv, f)
	go f.srv.Serve(l)
	s.onTeardown("stop PodResources stand-in", func() error { f.srv.Stop(); return nil })
	return f, nil
}

// Set records the slots pod namespace/name holds.
func (f *FakePodResources) Set(namespace, name string, slots ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slots[namespace+"/"+name] = slots
}

func (f *FakePodResources) pod(key string) *podresources.PodResources {
	ns, name, _ := strings.Cut(key, "/")
	return &podresources.PodResources{Name: name, Namespace: ns, Containers: []*podresources.ContainerResources{{
		Name:    "perf",
		Devices: []*podresources.ContainerDevices{{ResourceName: SocketResource, DeviceIds: f.slots[key]}},
	}}}
}

// List answers with every pod.
func (f *FakePodResources) List(context.Context, *podresources.ListPodResourcesRequest) (*podresources.ListPodResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out podresources.ListPodResourcesResponse
	for k := range f.slots {
		out.PodResources = append(out.PodResources, f.pod(k))
	}
	return &out, nil
}

// Get answers for one pod.
func (f *FakePodResources) Get(_ context.Context, r *podresources.GetPodResourcesRequest) (*podresources.GetPodResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.PodNamespace + "/" + r.PodName
	if _, ok := f.slots[key]; !ok {
		return nil, status.Errorf(5, "pod %s not found", key)
	}
	return &podresources.GetPodResourcesResponse{PodResources: f.pod(key)}, nil
}

// Allocatable asks a PodResources socket which devices of resource the node offers.
func Allocatable(ctx context.Context, sock, resource string) ([]string, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := podresources.NewPodResourcesListerClient(conn).GetAllocatableResources(ctx, &podresources.AllocatableResourcesRequest{})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range r.Devices {
		if d.ResourceName == resource {
			ids = append(ids, d.DeviceIds...)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// PodDevices asks a PodResources socket which devices of resource pod namespace/name holds.
func PodDevices(ctx context.Context, sock, namespace, name, resource string) ([]string, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := podresources.NewPodResourcesListerClient(conn).Get(ctx, &podresources.GetPodResourcesRequest{PodName: name, PodNamespace: namespace})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range r.PodResources.GetContainers() {
		for _, d := range c.Devices {
			if d.ResourceName == resource {
				ids = append(ids, d.DeviceIds...)
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Leftovers lists what a pod's CNI attachment may leave behind and must not once every DEL
// ran: mounts on slots, port.json files, link directories and records, attachment records,
// device-info files of the CNI.
func (s *Stack) Leftovers() ([]string, error) {
	var out []string
	for _, d := range []string{filepath.Join(s.StateDir(), "sockets"), filepath.Join(s.StateDir(), "links")} {
		mps, err := Mounts(d)
		if err != nil {
			return nil, err
		}
		for _, mp := range mps {
			out = append(out, "mount "+mp)
		}
	}
	ports, _ := filepath.Glob(filepath.Join(s.StateDir(), "sockets", "*", "port.json"))
	for _, p := range ports {
		out = append(out, "file "+p)
	}
	for _, d := range []string{
		filepath.Join(s.StateDir(), "links"),
		filepath.Join(s.StateDir(), "state"),
		filepath.Join(s.DevInfoDir(), "cni"),
	} {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if !e.IsDir() {
				out = append(out, "file "+p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SlotEntries lists a slot directory's entries (names), for "the next pod sees nothing".
func (s *Stack) SlotEntries(slot string) ([]string, error) {
	es, err := os.ReadDir(filepath.Join(s.StateDir(), "sockets", slot))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names, nil
}
