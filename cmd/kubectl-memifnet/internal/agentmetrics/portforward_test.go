package agentmetrics

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// fakeAPI stands in for the API server and the kubelet: it lists the agent pod and answers its
// portforward subresource with the SPDY port-forward protocol (refusing the websocket upgrade,
// as an API server without it does, so the client falls back as kubectl does), connecting each
// data stream to target, the agent's local endpoint.
type fakeAPI struct {
	t         *testing.T
	agent     corev1.Pod
	target    string // host:port of the "agent's" local /metrics
	forbidden bool

	mu    sync.Mutex
	ports []string // the port header of each data stream
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/v1/namespaces/memifnet-system/pods":
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
		list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{f.agent}}
		if err := enc.Encode(list, w); err != nil {
			f.t.Error(err)
		}
	case "/api/v1/namespaces/memifnet-system/pods/memifnet-node-x/portforward":
		f.portForward(w, r)
	default:
		http.Error(w, "not found: "+r.URL.Path, http.StatusNotFound)
	}
}

func (f *fakeAPI) portForward(w http.ResponseWriter, r *http.Request) {
	if f.forbidden {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,`+
			`"message":"pods \"memifnet-node-x\" is forbidden: User \"viewer\" cannot create resource \"pods/portforward\" in API group \"\" in the namespace \"memifnet-system\""}`)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "websocket port-forward not supported", http.StatusBadRequest)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{"portforward.k8s.io"}); err != nil {
		return
	}
	streams := make(chan httpstream.Stream, 4)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
		streams <- s
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	for {
		select {
		case <-conn.CloseChan():
			return
		case s := <-streams:
			if s.Headers().Get("streamType") != "data" {
				continue
			}
			f.mu.Lock()
			f.ports = append(f.ports, s.Headers().Get("port"))
			f.mu.Unlock()
			go func() {
				defer s.Close()
				c, err := net.Dial("tcp", f.target)
				if err != nil {
					return
				}
				defer c.Close()
				go func() { _, _ = io.Copy(c, s) }()
				_, _ = io.Copy(s, c)
			}()
		}
	}
}

// TestPortForwardScrape: kubectl-memifnet finds the node's agent, forwards to the port of its
// --local-metrics-address and reads the per-port metrics through it; a user without create
// pods/portforward gets an error that says so.
func TestPortForwardScrape(t *testing.T) {
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, exposition)
	}))
	defer metrics.Close()
	f := &fakeAPI{t: t, target: metrics.Listener.Addr().String(), agent: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "memifnet-node-x", Namespace: "memifnet-system"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "deviceplugin",
			Args: []string{"--http-address=:9102", "--local-metrics-address=127.0.0.1:9311"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}}
	api := httptest.NewServer(f)
	defer api.Close()
	cfg := &rest.Config{Host: api.URL}
	p := PortForward{Client: kubernetes.NewForConfigOrDie(cfg), Config: cfg, Namespace: "memifnet-system", Selector: "app.kubernetes.io/name=memifnet-node"}
	snap, err := p.Scrape(t.Context(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if c := snap.Ports[Key{"ns", "rx", "east"}]; !c.Up || c.RxPackets != 1.5e6 {
		t.Errorf("scraped %+v", snap.Ports)
	}
	f.mu.Lock()
	ports := strings.Join(f.ports, ",")
	f.mu.Unlock()
	if ports != "9311" {
		t.Errorf("forwarded to ports %q, want the local endpoint's 9311", ports)
	}

	f.forbidden = true
	if _, err := p.Scrape(t.Context(), "n1"); err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "create pods/portforward") {
		t.Errorf("without the right: %v; want forbidden, naming pods/portforward", err)
	}
	f.forbidden = false
	f.agent.Spec.Containers[0].Args[1] = "--local-metrics-address="
	if _, err := p.Scrape(t.Context(), "n1"); err == nil || !strings.Contains(err.Error(), "serves no local metrics") {
		t.Errorf("an agent without a local endpoint: %v", err)
	}
}
