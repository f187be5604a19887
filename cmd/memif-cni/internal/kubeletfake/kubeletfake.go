// Package kubeletfake has stand-ins for the kubelet's PodResources gRPC service and Pods API, and
// for the API server's pod endpoint, built from the real k8s.io types, for tests that run the
// plugin binary against them.
package kubeletfake

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Pod is what the stand-ins know about one pod.
type Pod struct {
	Namespace, Name, UID string
	Annotations          map[string]string
	Slots                []string // memifnet.io/socket device IDs, in container "app"
}

// Kubelet holds the pods and serves them.
type Kubelet struct {
	api.UnimplementedPodResourcesListerServer
	mu   sync.Mutex
	pods map[string]Pod
	// NoGet makes Get answer Unimplemented, as a kubelet without KubeletPodResourcesGet does.
	NoGet bool
	Gets  int
	Lists int
}

// New returns an empty kubelet.
func New() *Kubelet { return &Kubelet{pods: map[string]Pod{}} }

// SetPod adds or replaces a pod.
func (k *Kubelet) SetPod(p Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods[p.Namespace+"/"+p.Name] = p
}

// DeletePod forgets a pod.
func (k *Kubelet) DeletePod(ns, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.pods, ns+"/"+name)
}

func resources(p Pod) *api.PodResources {
	return &api.PodResources{Name: p.Name, Namespace: p.Namespace, Containers: []*api.ContainerResources{{
		Name:    "app",
		Devices: []*api.ContainerDevices{{ResourceName: "memifnet.io/socket", DeviceIds: p.Slots}},
	}}}
}

// List implements PodResourcesLister.
func (k *Kubelet) List(context.Context, *api.ListPodResourcesRequest) (*api.ListPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Lists++
	r := &api.ListPodResourcesResponse{}
	for _, p := range k.pods {
		r.PodResources = append(r.PodResources, resources(p))
	}
	return r, nil
}

// Get implements PodResourcesLister.
func (k *Kubelet) Get(_ context.Context, req *api.GetPodResourcesRequest) (*api.GetPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Gets++
	if k.NoGet {
		return nil, status.Error(codes.Unimplemented, "KubeletPodResourcesGet is disabled")
	}
	p, ok := k.pods[req.PodNamespace+"/"+req.PodName]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod %s/%s not found", req.PodNamespace, req.PodName)
	}
	return &api.GetPodResourcesResponse{PodResources: resources(p)}, nil
}

// ServePodResources serves PodResources on <kubeletDir>/pod-resources/kubelet.sock.
func (k *Kubelet) ServePodResources(t testing.TB, kubeletDir string) {
	t.Helper()
	dir := filepath.Join(kubeletDir, "pod-resources")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	api.RegisterPodResourcesListerServer(srv, k)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

func (k *Kubelet) corePod(p Pod) corev1.Pod {
	return corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: ktypes.UID(p.UID), Annotations: p.Annotations},
	}
}

// ServePodsAPI serves the kubelet's GET /pods over HTTPS with a self-signed certificate, as the
// kubelet does, and returns its base URL.
func (k *Kubelet) ServePodsAPI(t testing.TB) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pods" {
			http.NotFound(w, r)
			return
		}
		k.mu.Lock()
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, p := range k.pods {
			list.Items = append(list.Items, k.corePod(p))
		}
		k.mu.Unlock()
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// ServeAPIServer serves GET /api/v1/namespaces/<ns>/pods/<name> and writes a kubeconfig for it
// into dir; it returns the kubeconfig's path.
func (k *Kubelet) ServeAPIServer(t testing.TB, dir string) string {
	t.Helper()
	// HTTPS with the server's CA in the kubeconfig, as a real cluster has: client-go does not send
	// a bearer token to a plain-HTTP server.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if len(parts) != 6 || parts[0] != "api" || parts[3] != "" && parts[4] != "pods" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer test-token" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		k.mu.Lock()
		p, ok := k.pods[parts[3]+"/"+parts[5]]
		k.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(k.corePod(p))
	}))
	t.Cleanup(srv.Close)
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kc := filepath.Join(dir, "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "` + srv.URL + `", certificate-authority-data: ` + ca + `}}]
users: [{name: cni, user: {token: test-token}}]
contexts: [{name: test, context: {cluster: test, user: cni}}]
current-context: test
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}
