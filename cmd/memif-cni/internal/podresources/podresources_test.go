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

	"google.golang.org/protobuf/proto"
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

func TestCallStatus(t *testing.T) {
	k := kubeletfake.New()
	c := newClient(serve(t, k))
	_, err := c.call(context.Background(), "/v1.PodResourcesLister/Get", encodeGetRequest("x", "ns"))
	var st *statusError
	if !errors.As(err, &st) || st.code != 5 || st.message != "pod ns/x not found" {
		t.Errorf("Get of a missing pod: %#v", err)
	}
	_, err = c.call(context.Background(), "/v1.PodResourcesLister/NoSuchMethod", nil)
	if !errors.As(err, &st) || st.code != 12 || !strings.Contains(err.Error(), "Unimplemented") {
		t.Errorf("unknown method: %v", err)
	}
}

// The request we encode is what the generated code decodes.
func TestEncodeGetRequest(t *testing.T) {
	var req api.GetPodResourcesRequest
	if err := proto.Unmarshal(encodeGetRequest("pod-ä", "ns"), &req); err != nil {
		t.Fatal(err)
	}
	if req.PodName != "pod-ä" || req.PodNamespace != "ns" {
		t.Errorf("decoded %q %q", req.PodName, req.PodNamespace)
	}
}

// A response with every field of the schema set decodes to the same slots as the generated code.
func TestDecodeMatchesGenerated(t *testing.T) {
	topo := &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: 1}}}
	pod := &api.PodResources{Name: "a", Namespace: "ns", Containers: []*api.ContainerResources{{
		Name: "init",
		Devices: []*api.ContainerDevices{
			{ResourceName: "example.com/gpu", DeviceIds: []string{"gpu0"}, Topology: topo},
			{ResourceName: names.SocketResource, DeviceIds: []string{"slot-003", "slot-001"}, Topology: topo},
		},
		CpuIds: []int64{0, 1},
		Memory: []*api.ContainerMemory{{MemoryType: "hugepages-2Mi", Size: 1 << 30, Topology: topo}},
		DynamicResources: []*api.DynamicResource{{ClaimName: "c", ClaimNamespace: "ns",
			ClaimResources: []*api.ClaimResource{{CdiDevices: []*api.CDIDevice{{Name: "vendor/x=y"}}, DriverName: "d"}}}},
	}, {
		Name:    "app",
		Devices: []*api.ContainerDevices{{ResourceName: names.SocketResource, DeviceIds: []string{"slot-000"}}},
	}}}
	b, err := proto.Marshal(&api.ListPodResourcesResponse{PodResources: []*api.PodResources{{Name: "other", Namespace: "ns"}, pod}})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := decodeListResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || pods[1].name != "a" || pods[1].namespace != "ns" || len(pods[1].containers) != 2 {
		t.Fatalf("decoded %+v", pods)
	}
	if d := pods[1].containers[0].devices[1]; d.resourceName != names.SocketResource || !slices.Equal(d.deviceIDs, []string{"slot-003", "slot-001"}) {
		t.Errorf("devices %+v", d)
	}
	g, err := proto.Marshal(&api.GetPodResourcesResponse{PodResources: pod})
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodeGetResponse(g)
	if err != nil || p == nil || !slices.EqualFunc(p.containers, pods[1].containers, func(a, b containerRes) bool { return len(a.devices) == len(b.devices) }) {
		t.Errorf("Get response: %+v, %v", p, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"truncated length":  {0x0a, 0x05, 'a'},
		"bad tag":           {0x80},
		"name as a varint":  {0x0a, 0x02, 0x08, 0x01},
		"group wire type":   {0x0b},
		"overlong varint":   {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"devices truncated": {0x0a, 0x04, 0x1a, 0x02, 0x12, 0x05},
	} {
		if _, err := decodeListResponse(b); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// FuzzDecodeList checks that no input crashes the decoder and that whatever both decoders accept
// gives the same pods and socket slots.
func FuzzDecodeList(f *testing.F) {
	b, _ := proto.Marshal(&api.ListPodResourcesResponse{PodResources: []*api.PodResources{{Name: "a", Namespace: "ns",
		Containers: []*api.ContainerResources{{Name: "app", CpuIds: []int64{3},
			Devices: []*api.ContainerDevices{{ResourceName: names.SocketResource, DeviceIds: []string{"slot-1"}}}}}}}})
	f.Add(b)
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		ours, err := decodeListResponse(b)
		var gen api.ListPodResourcesResponse
		if err != nil || proto.Unmarshal(b, &gen) != nil {
			return
		}
		if len(ours) != len(gen.PodResources) {
			t.Fatalf("%d pods, generated code %d", len(ours), len(gen.PodResources))
		}
		for i, g := range gen.PodResources {
			o := ours[i]
			if o.name != g.Name || o.namespace != g.Namespace || len(o.containers) != len(g.Containers) {
				t.Fatalf("pod %d: %+v vs %+v", i, o, g)
			}
			for j, gc := range g.Containers {
				var gd, od []string
				for _, d := range gc.Devices {
					gd = append(append(gd, d.ResourceName), d.DeviceIds...)
				}
				for _, d := range o.containers[j].devices {
					od = append(append(od, d.resourceName), d.deviceIDs...)
				}
				if !slices.Equal(gd, od) {
					t.Fatalf("pod %d container %d: devices %q vs %q", i, j, od, gd)
				}
			}
		}
	})
}
